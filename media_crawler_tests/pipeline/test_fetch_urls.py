"""`media-crawler fetch-urls` against the built-in simulator: the store ends equal to the
feed, a re-run downloads nothing, failures end in their classified states, and the exit
code says whether the list is complete."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import requests

from media_crawler.cli import main
from media_crawler.store.database import dispose_engines
from media_crawler.store.ledger import Ledger


@pytest.fixture
def fresh_sim(simulator):
    """The session's simulator with its stats and one-shot faults reset."""
    requests.post(f"{simulator.base_url}/_sim/stats/reset", timeout=5).raise_for_status()
    yield simulator
    dispose_engines()


def fetch(simulator, feed: str, store, capsys) -> tuple[int, list[dict]]:
    # One process: a forked shard writes to the real stdout, which capsys does not see
    # (test_fetch_urls_processes.py runs the command as a subprocess for that).
    code = main(["fetch-urls", "--feed", f"{simulator.base_url}{feed}", "--store", str(store),
                 "--allow-host", "127.0.0.1:*", "--workers", "4", "--processes", "1"])
    out = capsys.readouterr().out
    return code, [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def feed_items(simulator, feed: str) -> list[dict]:
    return requests.get(f"{simulator.base_url}{feed}", timeout=5).json()["items"]


def stored_blobs(store) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (store / "sha256").glob("*/*/*") if p.is_file()}


def media_stats(simulator) -> dict:
    stats = requests.get(f"{simulator.base_url}/_sim/stats", timeout=5).json()
    return {path: entry for path, entry in stats["by_path"].items() if path.startswith("/media/")}


def by_item(lines: list[dict]) -> dict[str, list[tuple[str, str]]]:
    stages: dict[str, list[tuple[str, str]]] = {}
    for line in lines:
        if line.get("logger") == "media_crawler.items" and line.get("stage") in ("download", "verify", "commit"):
            stages.setdefault(line["canonical_url"], []).append((line["stage"], line["outcome"]))
    return stages


def test_a_clean_list_lands_whole_in_the_store_and_a_rerun_downloads_nothing(fresh_sim, tmp_path, capsys):
    store = tmp_path / "store"
    items = feed_items(fresh_sim, "/urls/demo.json")
    code, lines = fetch(fresh_sim, "/urls/demo.json", store, capsys)
    assert code == 0

    blobs = stored_blobs(store)
    assert set(blobs) == {item["sha256"] for item in items}
    assert all(hashlib.sha256(data).hexdigest() == name for name, data in blobs.items())
    assert not list((store / "staging").glob("*.part"))
    assert Ledger(f"sqlite:///{store / 'ledger.db'}").state_counts() == {"committed": len(items)}
    # Pipelined: one line per item, saying how each stage went (a new item has no fetch line of its own).
    stages = by_item(lines)
    assert len(stages) == len(items)
    assert all(seen == [("commit", "ok")] for seen in stages.values())
    settled = [line for line in lines if line.get("stage") == "commit"]
    assert all((line["download"], line["verify"], line["commit"]) == ("ok", "ok", "ok") for line in settled)
    assert all(line["sha256"] in blobs and line["bytes"] == len(blobs[line["sha256"]]) and line["task_id"]
               and line["duration_ms"] >= line["download_ms"] for line in settled)
    assert not [line for line in lines if line.get("stage") == "fetch" and line.get("reason") == "new"]
    assert sum(entry["requests"] for entry in media_stats(fresh_sim).values()) == len(items)

    requests.post(f"{fresh_sim.base_url}/_sim/stats/reset", timeout=5).raise_for_status()
    code, _ = fetch(fresh_sim, "/urls/demo.json", store, capsys)
    assert code == 0
    assert media_stats(fresh_sim) == {}
    assert set(stored_blobs(store)) == {item["sha256"] for item in items}


def test_failures_end_in_their_classified_states_and_the_exit_code_says_incomplete(fresh_sim, tmp_path, capsys):
    store = tmp_path / "store"
    items = {item["url"].rsplit("/", 1)[-1]: item for item in feed_items(fresh_sim, "/urls/errors.json")}
    code, lines = fetch(fresh_sim, "/urls/errors.json", store, capsys)
    assert code != 0

    states = {task.media_url.rsplit("/", 1)[-1]: task for task in Ledger(f"sqlite:///{store / 'ledger.db'}").tasks()}
    assert states["missing.jpg"].state == "gone" and states["missing.jpg"].error_class == "not_found"
    assert states["broken.jpg"].state == "retry_wait" and states["broken.jpg"].error_class == "http_5xx"
    assert states["throttled.jpg"].state == "committed"  # 429 + Retry-After once, then OK
    assert states["truncated.jpg"].state == "committed"  # cut once, then resumed
    blobs = stored_blobs(store)
    assert set(blobs) == {items["throttled.jpg"]["sha256"], items["truncated.jpg"]["sha256"]}
    assert not list((store / "staging").glob("*.part"))

    # The cut body was resumed with Range, not fetched again from byte zero.
    truncated = media_stats(fresh_sim)["/media/urls/errors/truncated.jpg"]
    assert truncated["requests"] == 2 and "206" in truncated["statuses"]
    assert truncated["bytes"] == items["truncated.jpg"]["size"]
    failed = [line for line in lines if line.get("outcome") == "failed" and line.get("stage") == "download"]
    assert {line["canonical_url"].rsplit("/", 1)[-1] for line in failed} == {"missing.jpg", "broken.jpg"}


def test_no_row_says_committed_before_the_folder_of_its_blob_is_synced(fresh_sim, tmp_path, capsys, monkeypatch):
    """The commits in the download workers defer their folder syncs to one per ledger batch
    (store `sync_deferred`), made before the batch is written: every ledger write that
    commits a row finds its blob's folder synced already, and no folder fsync per item."""
    from media_crawler.store import cas
    from media_crawler.store.transitions import Committed, Downloaded, Then

    synced: set = set()
    per_item_fsyncs: list = []
    committed_unsynced: list = []
    real_sync, real_apply, real_fsync_dir = cas._sync_folders, Ledger.apply, cas._fsync_dir
    # The folders as paths (the store passes them as paths or as their text).
    monkeypatch.setattr(cas, "_sync_folders",
                        lambda root, folders: (synced.update(map(Path, folders)), real_sync(root, folders)))
    monkeypatch.setattr(cas, "_fsync_dir", lambda path: (per_item_fsyncs.append(Path(path)), real_fsync_dir(path)))

    def moves(transition):
        return [*moves(transition.first), *moves(transition.second)] if isinstance(transition, Then) else [transition]

    def checked_apply(ledger, changes):
        changes = list(changes)
        for _task_id, _owner, transition in changes:
            steps = moves(getattr(transition, "transition", transition))  # Released(...) wraps the stage's moves
            downloaded = [step for step in steps if isinstance(step, Downloaded)]
            if downloaded and any(isinstance(step, Committed) for step in steps):
                digest = downloaded[0].sha256
                if (tmp_path / "store" / "sha256" / digest[:2] / digest[2:4]) not in synced:
                    committed_unsynced.append(digest)
        return real_apply(ledger, changes)

    monkeypatch.setattr(Ledger, "apply", checked_apply)
    items = feed_items(fresh_sim, "/urls/demo.json")
    code, _ = fetch(fresh_sim, "/urls/demo.json", tmp_path / "store", capsys)
    assert code == 0 and set(stored_blobs(tmp_path / "store")) == {item["sha256"] for item in items}
    assert committed_unsynced == [] and len(synced) >= len(items)
    # The media's folders (the feed's answer, kept once under store/answers/, is a page, not an item).
    media_folders = tmp_path / "store" / "sha256"
    assert [path for path in per_item_fsyncs if path.is_relative_to(media_folders)] == [], "no folder fsync per item"

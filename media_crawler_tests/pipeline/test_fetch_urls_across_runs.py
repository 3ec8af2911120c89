"""What one run or stage leaves in the ledger for the next: the .part's resume validator
(a cut download is resumed, not fetched again from byte zero), the bad-bytes count (a
file that never verifies stops after errors.ATTEMPTS.after_bad_bytes tries, in a final
state), a stored blob (an item announcing its hash is committed without a download),
a lost .part (downloaded again, no hash trusted), and an item the disk guard did not
admit (handed back untouched, saying why)."""
from __future__ import annotations

import hashlib
import json
import sqlite3
from datetime import date
from dataclasses import replace

import pytest

from media_crawler import errors
from media_crawler.cli import main
from media_crawler.config import config_from_dict
from media_crawler.models import DayWindow
from media_crawler.platforms.registry import parse_source
from media_crawler.pipeline.discover import discover
from media_crawler.pipeline.download import Workers, download_partition
from media_crawler.pipeline.list_downloads import verify_and_commit
from media_crawler.pipeline.runtime import Runtime
from media_crawler.pipeline.verify_commit import commit_partition, verify_partition
from media_crawler.store.database import dispose_engines
from media_crawler.store.ledger import Ledger
from media_crawler_tests.download.httpserver import Reply, ScriptedServer
from media_crawler_sim.hostile.builders import image_bytes

ETAG = '"v1"'


@pytest.fixture
def server():
    with ScriptedServer() as running:
        yield running
    dispose_engines()


@pytest.fixture
def one_download_per_run(monkeypatch):
    """One download attempt per item per run: the next try is the next run's, so what
    carries an item from one run to the next is only what the ledger kept."""
    monkeypatch.setattr(errors, "ATTEMPTS", replace(errors.ATTEMPTS, in_step=1))


def fetch(server, store, items: list[dict]) -> int:
    feed = server.route("/feed.json", Reply(json.dumps({"items": items}).encode(), content_type="application/json"))
    return main(["fetch-urls", "--feed", feed, "--store", str(store), "--allow-host", "127.0.0.1:*",
                 "--workers", "1", "--processes", "1"])


def only_task(store):
    tasks = Ledger(f"sqlite:///{store / 'ledger.db'}").tasks()
    assert len(tasks) == 1, tasks
    return tasks[0]


def test_a_cut_download_is_resumed_by_the_next_run_with_the_validator_the_ledger_kept(
        server, one_download_per_run, tmp_path):
    body = image_bytes("PNG", size=(400, 300), compress_level=0)  # large enough to cut in the middle
    half = len(body) // 2
    url = server.route("/photo.png", Reply(body, content_type="image/png", etag=ETAG, cut_at=half))
    store = tmp_path / "store"
    items = [{"url": url, "sha256": hashlib.sha256(body).hexdigest(), "size": len(body)}]

    assert fetch(server, store, items) != 0  # cut: the list is incomplete
    task = only_task(store)
    assert task.state == "retry_wait" and task.error_class == "truncated_body"
    assert task.etag == ETAG  # the .part's validator, kept for the next run
    assert [part.stat().st_size for part in (store / "staging").glob("*.part")] == [half]

    server.route("/photo.png", Reply(body, content_type="image/png", etag=ETAG))
    assert fetch(server, store, items) == 0
    done = only_task(store)
    assert (done.state, done.sha256, done.size, done.etag) == ("committed", items[0]["sha256"], len(body), ETAG)
    started_at, finished_at = ledger_values(store, "started_at", "finished_at")  # what the durations report reads
    assert started_at is not None and finished_at is not None and started_at <= finished_at
    first, *resumed = server.requests_to("/photo.png")
    assert first.body_bytes == half and len(resumed) == 1
    assert resumed[0].headers.get("Range") == f"bytes={half}-" and resumed[0].headers.get("If-Range") == ETAG
    assert resumed[0].status == 206 and resumed[0].body_bytes == len(body) - half
    blob = store / "sha256" / items[0]["sha256"][:2] / items[0]["sha256"][2:4] / items[0]["sha256"]
    assert blob.read_bytes() == body


def list_runtime(server, store, items: list[dict], **settings):
    """The runtime and source fetch-urls would make for this list, discovered once."""
    feed = server.route("/feed.json", Reply(json.dumps({"items": items}).encode(), content_type="application/json"))
    config = config_from_dict({"store": str(store), "ledger_url": f"sqlite:///{store / 'ledger.db'}",
                               "allow_hosts": ["127.0.0.1:*"], "sources": [{"urls": feed}], **settings})
    runtime, source = Runtime.from_config(config), parse_source("urls", feed)
    discover(runtime, source, DayWindow(date.today()))
    return runtime, source


def test_an_item_whose_announced_hash_is_stored_is_committed_without_a_download(server, tmp_path):
    body = image_bytes("PNG")
    digest = hashlib.sha256(body).hexdigest()
    url = server.route("/photo.png", Reply(body, content_type="image/png"))
    store = tmp_path / "store"
    runtime, source = list_runtime(server, store, [{"url": url, "sha256": digest}])
    staged = tmp_path / "same-bytes-from-elsewhere"
    staged.write_bytes(body)
    runtime.store.put_if_absent(staged, digest)  # e.g. another list stored them since

    download_partition(runtime, source, None, workers=Workers(1))
    task = only_task(store)
    assert (task.state, task.sha256) == ("committed", digest)
    assert server.requests_to("/photo.png") == []
    assert ledger_values(store, "committed_at")[0] is not None


def ledger_values(store, *columns: str) -> tuple:
    with sqlite3.connect(store / "ledger.db") as conn:
        return conn.execute(f"SELECT {', '.join(columns)} FROM mc_tasks").fetchone()


def test_items_not_admitted_by_the_disk_guard_are_handed_back_untouched_saying_why(server, tmp_path):
    url = server.route("/photo.png", Reply(image_bytes("PNG"), content_type="image/png"))
    store = tmp_path / "store"
    runtime, source = list_runtime(server, store, [{"url": url}], min_free_bytes=2**62)
    download_partition(runtime, source, None, workers=Workers(1))
    task = only_task(store)
    assert (task.state, task.attempts) == ("discovered", 0) and server.requests_to("/photo.png") == []
    reason, since, cause, owner = ledger_values(store, "wait_reason", "wait_since", "wait_cause", "lease_owner")
    assert (reason, cause, owner) == ("disk_guard", "disk_full", None) and since is not None


def test_a_part_lost_before_verify_is_downloaded_again_without_its_hash(server, tmp_path):
    body = image_bytes("PNG")
    url = server.route("/photo.png", Reply(body, content_type="image/png"))
    store = tmp_path / "store"
    runtime, source = list_runtime(server, store, [{"url": url}])
    download_partition(runtime, source, None, workers=Workers(1))
    assert only_task(store).state == "downloaded"
    for part in (store / "staging").glob("*.part"):
        part.unlink()  # reconcile, or a crash before the fsync

    verify_partition(runtime, source, None)
    task = only_task(store)
    assert (task.state, task.sha256, task.size) == ("discovered", None, None)
    download_partition(runtime, source, None, workers=Workers(1))
    verify_partition(runtime, source, None)
    commit_partition(runtime, source, None)
    assert only_task(store).state == "committed" and len(server.requests_to("/photo.png")) == 2


def test_a_file_that_never_verifies_stops_after_the_bad_bytes_limit(server, one_download_per_run, tmp_path):
    """Listed once, then download steps retried (a Dagster step retry takes retry_wait rows at
    once): the verify failures, not a new listing, are what must end it."""
    served = image_bytes("PNG")
    url = server.route("/wrong.png", Reply(served, content_type="image/png"))
    store = tmp_path / "store"
    # The feed promises other bytes than the server sends: every download fails its hash check.
    runtime, source = list_runtime(server, store, [{"url": url, "sha256": hashlib.sha256(b"promised").hexdigest()}])
    limit = errors.ATTEMPTS.after_bad_bytes

    steps = 0
    while runtime.ledger.state_counts().get("retry_wait", 0) + runtime.ledger.state_counts().get("discovered", 0):
        assert steps <= limit, f"still retried after {steps} download steps: {only_task(store)}"
        workers = Workers(1, after_download=lambda item: verify_and_commit(runtime, item))
        download_partition(runtime, source, None, workers=workers, ignore_backoff=True)
        steps += 1
    task = only_task(store)
    assert task.state == "failed" and task.error_class == "hash_mismatch"
    assert 1 <= len(server.requests_to("/wrong.png")) <= limit
    assert not list((store / "sha256").glob("*/*/*")) and not list((store / "staging").glob("*.part"))

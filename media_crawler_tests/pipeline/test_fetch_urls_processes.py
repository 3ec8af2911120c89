"""fetch-urls over several processes: the list is split by ledger id, every line of
every process arrives whole, a shard process that dies is taken over, and a list
longer than one claim is fetched in several passes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date

import pytest

from media_crawler.config import config_from_dict
from media_crawler.models import DayWindow, Lease
from media_crawler.platforms.registry import parse_source
from media_crawler.pipeline import fetch_list as fetch_list_module
from media_crawler.pipeline import list_downloads
from media_crawler.store.ledger import Ledger
from media_crawler.store.leases import claim_downloads
from media_crawler_tests.pipeline.test_fetch_urls import (  # noqa: F401 - fresh_sim is a fixture
    feed_items,
    fresh_sim,
    media_stats,
    stored_blobs,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="--processes forks (Linux only)")


def config_for(store, simulator):
    return config_from_dict({"store": str(store), "ledger_url": f"sqlite:///{store / 'ledger.db'}",
                             "allow_hosts": ["127.0.0.1:*"], "min_free_bytes": 1024**2,
                             "sources": [{"urls": f"{simulator.base_url}/urls/demo.json"}]})


def test_two_processes_split_the_list_and_every_line_arrives_whole(fresh_sim, tmp_path):
    store = tmp_path / "store"
    items = feed_items(fresh_sim, "/urls/demo.json")
    done = subprocess.run(
        [sys.executable, "-m", "media_crawler.cli", "fetch-urls", "--feed", f"{fresh_sim.base_url}/urls/demo.json",
         "--store", str(store), "--allow-host", "127.0.0.1:*", "--workers", "4", "--processes", "2"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert done.returncode == 0, done.stderr
    # The command ends its process without the interpreter's teardown (cli.end_without_teardown):
    # the ledger was closed first, so SQLite checkpointed its WAL into the database and removed it.
    assert not (store / "ledger.db-wal").exists()
    lines = [json.loads(line) for line in done.stdout.splitlines()]  # a mixed line would not parse
    commits = [line for line in lines if line.get("stage") == "commit" and line.get("outcome") == "ok"]
    assert sorted(line["canonical_url"] for line in commits) == sorted({line["canonical_url"] for line in commits})
    assert len(commits) == len(items)
    assert len({line["worker"] for line in commits}) == 2  # both processes downloaded
    assert set(stored_blobs(store)) == {item["sha256"] for item in items}
    assert Ledger(f"sqlite:///{store / 'ledger.db'}").state_counts() == {"committed": len(items)}
    assert sum(entry["requests"] for entry in media_stats(fresh_sim).values()) == len(items)
    assert f"committed={len(items)}" in done.stderr


def test_an_incomplete_list_exits_1_from_the_console_script_too(fresh_sim, tmp_path):
    """The exit without teardown keeps the command's exit code and its last words on stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "media_crawler.cli", "fetch-urls", "--feed", f"{fresh_sim.base_url}/urls/missing.json",
         "--store", str(tmp_path / "store"), "--allow-host", "127.0.0.1:*", "--processes", "2"],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "feed failed" in done.stderr.splitlines()[-1]


@pytest.mark.parametrize("feed, code", [("/urls/demo.json", 0), ("/urls/missing.json", 1)])
def test_a_log_reader_that_leaves_does_not_change_the_exit_code(fresh_sim, tmp_path, feed, code):
    """`fetch-urls | head`: the reader of the log leaving is not an error, and the exit
    code still says whether the list is complete."""
    process = subprocess.Popen(
        [sys.executable, "-m", "media_crawler.cli", "fetch-urls", "--feed", f"{fresh_sim.base_url}{feed}",
         "--store", str(tmp_path / "store"), "--allow-host", "127.0.0.1:*", "--processes", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    process.stdout.close()  # the reader leaves before the first line
    stderr = process.communicate(timeout=120)[1]
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr


def test_the_rows_of_a_shard_process_that_dies_are_taken_over(fresh_sim, tmp_path, monkeypatch):
    store = tmp_path / "store"
    items = feed_items(fresh_sim, "/urls/demo.json")
    real_pass = list_downloads._download_pass

    def dying_shard(runtime, source, threads, shard):
        if shard == (1, 2):  # lease its rows, then die as a SIGKILL would leave them
            from media_crawler.pipeline.liveness import lease_owner

            claim_downloads(runtime.ledger, source_key=source.key, day=None, lease=Lease(lease_owner(None), 600), shard=shard)
            os._exit(9)
        return real_pass(runtime, source, threads, shard)

    monkeypatch.setattr(list_downloads, "_download_pass", dying_shard)
    summary = fetch_list_module.fetch_list(config_for(store, fresh_sim), parse_source("urls", f"{fresh_sim.base_url}/urls/demo.json"),
                                           DayWindow(date.today()), workers=4, processes=2)
    assert summary.complete and summary.states == {"committed": len(items)}
    assert set(stored_blobs(store)) == {item["sha256"] for item in items}


def test_a_list_longer_than_one_claim_is_fetched_in_several_passes(fresh_sim, tmp_path, monkeypatch):
    store = tmp_path / "store"
    items = feed_items(fresh_sim, "/urls/demo.json")
    assert len(items) > 3
    monkeypatch.setattr("media_crawler.store.ledger.CLAIM_LIMIT", 3)
    monkeypatch.setattr(list_downloads, "CLAIM_LIMIT", 3)
    summary = fetch_list_module.fetch_list(config_for(store, fresh_sim), parse_source("urls", f"{fresh_sim.base_url}/urls/demo.json"),
                                           DayWindow(date.today()), workers=2, processes=1)
    assert summary.complete and summary.states == {"committed": len(items)}


def test_processes_share_a_postgresql_ledger(fresh_sim, tmp_path, postgres):
    """The production ledger: each forked process opens its own connections, none is shared."""
    store = tmp_path / "store"
    ledger_url = postgres.create()
    items = feed_items(fresh_sim, "/urls/demo.json")
    done = subprocess.run(
        [sys.executable, "-m", "media_crawler.cli", "fetch-urls", "--feed", f"{fresh_sim.base_url}/urls/demo.json",
         "--store", str(store), "--ledger", ledger_url, "--allow-host", "127.0.0.1:*", "--workers", "4",
         "--processes", "2"],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert Ledger(ledger_url).state_counts() == {"committed": len(items)}
    assert set(stored_blobs(store)) == {item["sha256"] for item in items}
    assert sum(entry["requests"] for entry in media_stats(fresh_sim).values()) == len(items)

"""`crawl --workers N`: partitions run at once in worker processes, one Dagster run each, into the same
store and ledger a one-worker crawl fills, with progress counting every partition."""
from __future__ import annotations

import pytest
from dagster import DagsterInstance

from media_crawler.commands.crawl import crawl
from media_crawler.config import load_config
from media_crawler.store.open_store import open_blob_store
from media_crawler_tests.recovery.support import write_recovery_config

DAY = "2026-11-27"
# Three sources of the demo world in three shards: three partitions (kept few: the suite runs on 2 cores).
SOURCES = [{"bilibili": "user 12345"}, {"weibo": "user 678"}, {"weibo": "user 679", "api": "ajax"}]


class Snapshots:
    def __init__(self) -> None:
        self.seen = []

    def update(self, snapshot, final: bool = False) -> None:
        self.seen.append((snapshot.done, snapshot.total, final))


@pytest.fixture
def fresh_dagster_home(monkeypatch):
    """DAGSTER_HOME unset (crawl then makes <MEDIA_CRAWLER_HOME>/dagster_home), and unset again afterwards."""
    monkeypatch.setenv("DAGSTER_HOME", "unset-by-this-fixture")
    monkeypatch.delenv("DAGSTER_HOME")


def stored_blobs(config_path) -> set[str]:
    return set(open_blob_store(load_config(config_path).store_root).iter_sha256s())


def test_three_workers_fill_the_store_one_worker_fills(tmp_path, simulator, monkeypatch, fresh_dagster_home):
    stores = {}
    for workers in (1, 3):
        home = tmp_path / f"workers{workers}"
        monkeypatch.setenv("MEDIA_CRAWLER_HOME", str(home))
        monkeypatch.delenv("DAGSTER_HOME", raising=False)
        config_path = write_recovery_config(home, simulator, sources=SOURCES)
        progress = Snapshots()
        outcome = crawl(config_path, [DAY], workers=workers, progress_sinks=[progress])
        config = load_config(config_path)
        shards = {config.layout.shard_of(source) for source in config.sources}
        assert [p.shard for p in outcome.partitions] == sorted(shards) and len(shards) == 3
        assert all(p.success for p in outcome.partitions), [p.error for p in outcome.partitions]
        assert progress.seen[-1] == (len(shards), len(shards), True)
        assert [done for done, _, final in progress.seen if not final] == list(range(1, len(shards) + 1))
        with DagsterInstance.from_config(str(home / "dagster_home")) as instance:
            runs = {run.run_id for run in instance.get_runs()}
        assert {p.run_id for p in outcome.partitions} <= runs
        stores[workers] = stored_blobs(config_path)
    assert stores[1] and stores[1] == stores[3]

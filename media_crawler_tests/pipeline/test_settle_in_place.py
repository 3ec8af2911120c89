"""A Dagster crawl into a bucket settles each item in its download step
(pipeline/settle_in_place.py): the verify and commit steps find nothing left, the crawl
still counts the bytes it stored (the download step's `bytes_committed`), and the commit
step's hash check still re-reads this run's commits."""
from __future__ import annotations

import hashlib

import yaml
from dagster import AssetKey

from media_crawler.commands.crawl import crawl
from media_crawler.store.ledger import Ledger
from media_crawler.config import load_config
from media_crawler_tests.recovery.support import write_recovery_config
from media_crawler_tests.recovery.test_killed_dagster_run import dagster_home  # noqa: F401 (fixture)

DAY, SOURCE = "2026-11-26", "weibo-678"


def bucket_config(crawl_home, simulator, s3_server, monkeypatch):
    """The recovery tests' sources.yaml with its store a fresh bucket prefix (the AWS settings set)."""
    for name, value in s3_server.environment.items():
        monkeypatch.setenv(name, value)
    path = write_recovery_config(crawl_home, simulator)
    data = yaml.safe_load(path.read_text())
    data["store"] = s3_server.new_uri()
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_crawl_into_a_bucket_commits_in_its_download_step_and_counts_the_bytes(
        crawl_home, simulator, dagster_home, s3_server, monkeypatch):  # noqa: F811
    path = bucket_config(crawl_home, simulator, s3_server, monkeypatch)

    outcome = crawl(path, [DAY], [SOURCE], instance=dagster_home)
    assert not outcome.failed
    ledger = Ledger(load_config(path).ledger_url)
    committed = ledger.tasks(states=["committed"])
    assert committed and set(ledger.state_counts()) == {"committed"}
    assert sum(p.committed_bytes for p in outcome.partitions) == sum(t.size for t in committed)

    def metadata(asset: str) -> dict:
        event = dagster_home.get_latest_materialization_event(AssetKey(asset))
        return {k: getattr(v, "value", v) for k, v in event.asset_materialization.metadata.items()}

    downloads, commits = metadata("media_downloads"), metadata("committed_media")
    assert downloads["items_committed"] == len(committed) and downloads["items_unfinished"] == 0
    assert (commits["items_ok"], commits["bytes"]) == (0, 0), "the commit step found nothing left to commit"
    assert metadata("verified_media")["items_ok"] == 0


def test_the_hash_check_re_reads_what_the_download_step_committed(
        crawl_home, simulator, dagster_home, s3_server, monkeypatch):  # noqa: F811
    """committed_media's check covers this run's commits, made by its download step: an object
    overwritten with other bytes before the commit step is found (rehash since the run's start)."""
    from dagster import DagsterEventType

    from media_crawler.defs import assets

    path = bucket_config(crawl_home, simulator, s3_server, monkeypatch)
    verify = assets.verify_partition

    def verify_then_rot_one_object(runtime, sources, window):
        [task, *_] = runtime.ledger.tasks(states=["committed"])
        store, other = runtime.store, b"not the bytes this key names"
        store.client.put_object(store.bucket, store.key_for(task.sha256), other, hashlib.sha256(other).digest())
        return verify(runtime, sources, window)

    monkeypatch.setattr(assets, "verify_partition", verify_then_rot_one_object)
    outcome = crawl(path, [DAY], [SOURCE], instance=dagster_home)
    records = dagster_home.get_records_for_run(outcome.partitions[0].run_id,
                                               of_type=DagsterEventType.ASSET_CHECK_EVALUATION).records
    [evaluation] = [evaluation for evaluation in (r.event_log_entry.dagster_event.event_specific_data for r in records)
                    if evaluation.check_name == assets.HASHES_MATCH]
    assert not evaluation.passed
    assert evaluation.metadata["mismatches"].value == 1
    # A rotted blob is not a finished partition, whatever the ledger says: red, and said why.
    [partition] = outcome.partitions
    assert not partition.success and "1 blob(s) missing or not matching their names" in partition.error, partition

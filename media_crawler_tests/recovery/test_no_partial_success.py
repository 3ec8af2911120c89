"""No partial success: items still failing keep a partition red; gone items are reported by a check but leave it green."""
from __future__ import annotations

from dataclasses import replace

import pytest
from dagster import AssetCheckSeverity, DagsterInstance, materialize

from media_crawler import errors
from media_crawler.commands.crawl import prepare_home
from media_crawler.config import load_config
from media_crawler.defs import assets
from media_crawler.defs.partitions import partition_key
from media_crawler.defs.resources import crawl_resources
from media_crawler.definitions import crawl_assets_for
from media_crawler.platforms.registry import parse_source
from media_crawler.pipeline.liveness import process_token
from media_crawler.recovery.runs import PROCESS_TAG
from media_crawler_sim import faults
from media_crawler_sim.server import Simulator
from media_crawler.store.ledger import Ledger
from media_crawler_tests.recovery.support import write_recovery_config

DAY = "2026-11-27"


@pytest.fixture
def instance():
    with DagsterInstance.ephemeral() as inst:
        yield inst


def materialize_feed(instance, config_path, feed_url: str):
    config = load_config(config_path)
    prepare_home(instance, config)
    shard = config.layout.shard_of(parse_source("urls", feed_url))
    return materialize(crawl_assets_for(config), partition_key=partition_key(shard, DAY), instance=instance,
                       resources=crawl_resources(str(config_path)), raise_on_error=False)


def checks(result) -> dict:
    return {evaluation.check_name: evaluation for evaluation in result.get_asset_check_evaluations()}


def test_gone_items_are_reported_by_a_warning_check_and_the_partition_stays_green(crawl_home, instance):
    with Simulator(seed=1, port=0) as sim:
        feed = f"{sim.base_url}/urls/demo.json"
        gone = next(item for item in sim.truth()["media"] if item["source"] == f"urls: {feed}")
        sim.app.fault_book.plan(gone["path"], faults.NOT_FOUND)  # deleted upstream: 404 forever
        config_path = write_recovery_config(crawl_home, sim, [{"urls": feed}])
        result = materialize_feed(instance, config_path, feed)
    assert result.success, "a permanently unavailable item does not keep the partition red"
    tags = instance.get_run_by_id(result.run_id).tags
    assert tags[PROCESS_TAG] == process_token(), "the steps recorded which process ran the run"
    evaluations = checks(result)
    nothing_gone = evaluations[assets.NOTHING_GONE]
    assert not nothing_gone.passed and nothing_gone.severity == AssetCheckSeverity.WARN
    assert nothing_gone.metadata["items_gone"].value == 1
    assert evaluations[assets.HASHES_MATCH].passed
    states = Ledger(load_config(config_path).ledger_url).state_counts()
    assert states == {"committed": 8, "gone": 1}


def test_items_still_failing_after_their_retries_fail_the_partition(crawl_home, simulator, instance, monkeypatch):
    monkeypatch.setattr(errors, "ATTEMPTS", replace(errors.ATTEMPTS, in_step=1))  # the step retries still happen; no in-step sleeps
    monkeypatch.setattr(assets, "DOWNLOAD_RETRY_WAIT_S", 0.01)
    feed = f"{simulator.base_url}/urls/errors.json"  # 404, 500 forever, 429 once, cut once
    result = materialize_feed(instance, write_recovery_config(crawl_home, simulator, [{"urls": feed}]), feed)
    assert not result.success
    [failure] = [event for event in result.all_events if event.is_step_failure]
    assert failure.step_key == "committed_media" and "unfinished" in failure.step_failure_data.error.message
    retries = [event for event in result.all_events if event.event_type_value == "STEP_UP_FOR_RETRY"]
    assert retries, "media_downloads asked for its step retries before giving up"
    states = Ledger(load_config(crawl_home / "sources.yaml").ledger_url).state_counts()
    assert states.get("gone") == 1 and states.get("committed") == 2 and states.get("retry_wait") == 1, states


def test_a_lost_blob_keeps_its_partition_red_until_reconcile_and_a_rerun_store_it_again(crawl_home, simulator, instance):
    """A green partition is a claim about the store: a blob lost after the commit turns the
    partition red on its next run (the blocking check's finding fails the step, not only the
    check), and it turns green again once `reconcile --repair` re-queued the item and a re-run
    downloaded it."""
    import hashlib

    from media_crawler.recovery.reconcile import reconcile
    from media_crawler.store.cas import FilesystemBlobStore

    feed = f"{simulator.base_url}/urls/demo.json"
    config_path = write_recovery_config(crawl_home, simulator, [{"urls": feed}])
    assert materialize_feed(instance, config_path, feed).success
    config = load_config(config_path)
    ledger, store = Ledger(config.ledger_url), FilesystemBlobStore(config.store_root)
    lost = next(task for task in ledger.tasks(states=["committed"]))
    store.path_for(lost.sha256).unlink()

    again = materialize_feed(instance, config_path, feed)
    assert not again.success, "a partition whose blob is gone is not done"
    [failure] = [event for event in again.all_events if event.is_step_failure]
    assert failure.step_key == "committed_media"
    assert "1 blob(s) missing or not matching their names" in failure.step_failure_data.error.message
    assert not checks(again)[assets.HASHES_MATCH].passed, "the failing step still reports its check"

    assert [f.kind for f in reconcile(ledger, store, repair=True).findings] == ["missing_blob"]
    fixed = materialize_feed(instance, config_path, feed)
    assert fixed.success and checks(fixed)[assets.HASHES_MATCH].passed
    assert hashlib.sha256(store.path_for(lost.sha256).read_bytes()).hexdigest() == lost.sha256

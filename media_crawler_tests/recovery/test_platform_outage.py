"""An hour of 500s on one platform (time compressed): other platforms finish, retries are not burnt, the sensor drains the backlog."""
from __future__ import annotations

from dataclasses import replace

import pytest
import requests
from dagster import DagsterInstance, RunRequest, build_sensor_context

from media_crawler import errors
from media_crawler.commands.crawl import crawl
from media_crawler.config import load_config
from media_crawler.defs.partitions import split_partition_key
from media_crawler.defs.resources import crawl_resources
from media_crawler.recovery import rerequest
from media_crawler.store.ledger import Ledger
from media_crawler_tests.shard_support import requested_partitions, unfinished_sensor
from media_crawler_tests.recovery.support import assert_converged, partition_truth, write_recovery_config

DAY = "2026-11-27"
SOURCES = [{"weibo": "user 678"}, {"weibo": "user 679", "api": "ajax"}, {"bilibili": "user 12345"}]
WEIBO = ["weibo-678", "weibo-679"]


class FakeClock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def instance():
    with DagsterInstance.ephemeral() as inst:
        yield inst


def set_outage(sim, platform: str, status: int) -> None:
    answer = requests.post(f"{sim.base_url}/_sim/faults", params={"platform": platform, "status": status}, timeout=5)
    answer.raise_for_status()


def weibo_media_requests(sim) -> int:
    return sim.app.stats.snapshot()["requests"].get("/media/weibo", 0)


def sensor_tick(instance, config_path, cursor):
    with build_sensor_context(instance=instance, cursor=cursor,
                              resources=crawl_resources(str(config_path))) as context:
        result = unfinished_sensor(config_path)(context)
        cursor = context.cursor
    requests_ = [item for item in (result if isinstance(result, list) else []) if isinstance(item, RunRequest)]
    return [split_partition_key(key) for item in requests_ for key in requested_partitions(item)], cursor


def test_a_platform_down_for_an_hour_neither_burns_retries_nor_blocks_others_and_drains_after(
        crawl_home, simulator, instance, monkeypatch):
    monkeypatch.setattr(errors, "ATTEMPTS", replace(errors.ATTEMPTS, in_step=2))  # fewer in-step sleeps; the logic is the same
    clock = FakeClock()
    monkeypatch.setattr(rerequest, "clock", clock)
    config = load_config(write_recovery_config(crawl_home, simulator, SOURCES))
    ledger = Ledger(config.ledger_url)
    set_outage(simulator, "weibo", 500)
    try:
        before = weibo_media_requests(simulator)
        first = crawl(config.path, [DAY], instance=instance)
        weibo_shards = sorted({config.layout.shard_of(key) for key in WEIBO})
        assert sorted(p.shard for p in first.failed) == weibo_shards, "the failing platform's partitions are red"
        assert [p.success for p in first.partitions if "bilibili-12345" in p.sources] == [True]
        weibo_rows = ledger.tasks(states=None)
        weibo_rows = [t for t in weibo_rows if t.platform == "weibo"]
        attempted = weibo_media_requests(simulator) - before
        assert attempted < len(weibo_rows) * errors.ATTEMPTS.in_step, \
            "the breaker stopped handing out items once the platform was clearly down"

        # The rest of the hour: the sensor notices, then re-requests with a growing wait.
        requested, cursor = sensor_tick(instance, config.path, None)
        assert requested == [], "a partition is first noticed, then re-requested after a wait"
        waits = []
        for _ in range(2):
            clock.now += rerequest.wait_after(len(waits)) + 1
            waits.append(rerequest.wait_after(len(waits)))
            requested, cursor = sensor_tick(instance, config.path, cursor)
            assert sorted(key for key, _window in requested) == weibo_shards
            again, cursor = sensor_tick(instance, config.path, cursor)
            assert again == [], "no second request before the backoff has passed"
            for shard, window in requested:
                assert crawl(config.path, [window.day.isoformat()], shards=[shard], instance=instance).failed
        assert waits == sorted(waits) and waits[0] < waits[-1]
        states = {t.state for t in ledger.tasks() if t.platform == "weibo"}
        assert "failed" not in states and states <= {"retry_wait", "discovered"}, states
        assert max(t.attempts for t in ledger.tasks()) < errors.ATTEMPTS.per_item
    finally:
        set_outage(simulator, "weibo", 0)

    # Recovered: the next due tick re-requests both partitions, and they finish with no operator.
    clock.now += rerequest.MAX_WAIT_S + 1
    requested, cursor = sensor_tick(instance, config.path, cursor)
    assert sorted(key for key, _window in requested) == weibo_shards
    for shard, window in requested:
        assert not crawl(config.path, [window.day.isoformat()], shards=[shard], instance=instance).failed
    assert_converged(config.store_root, ledger, partition_truth(simulator.truth(), [(k, DAY) for k in
                                                                                      [*WEIBO, "bilibili-12345"]]))
    assert sensor_tick(instance, config.path, cursor)[0] == [], "finished partitions are not requested again"

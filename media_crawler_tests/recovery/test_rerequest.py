"""The unfinished-partitions sensor's plan: notice, then back off 2 min doubling to 1 h, bounded per tick, never beside a live run."""
from __future__ import annotations

from media_crawler.recovery.rerequest import BASE_WAIT_S, MAX_WAIT_S, plan_rerequests, wait_after

A, B = ("bilibili-1", "2026-11-26"), ("weibo-2", "2026-11-26")
REGISTERED = {"bilibili-1", "weibo-2"}


def plan(unfinished, state, now, in_flight=(), limit=5):
    return plan_rerequests(unfinished, state, now, registered=REGISTERED, in_flight=set(in_flight), limit=limit)


def test_a_partition_is_noticed_first_then_requested_with_a_doubling_wait_capped_at_an_hour():
    due, state = plan([A], {}, now=0.0)
    assert due == [] and state == {"bilibili-1|2026-11-26": {"n": 0, "at": 0.0}}
    now, requested_at = 0.0, []
    while now < 4 * 3600:
        now += 30
        due, state = plan([A], state, now)
        if due:
            requested_at.append(now)
    gaps = [later - earlier for earlier, later in zip([0.0, *requested_at], requested_at)]
    assert gaps[0] >= BASE_WAIT_S and gaps == sorted(gaps) and max(gaps) <= MAX_WAIT_S + 30
    assert len([t for t in requested_at if t <= 3600]) <= 5, "an hour of outage costs a handful of runs"
    assert wait_after(10) == MAX_WAIT_S


def test_in_flight_unregistered_and_over_the_limit_are_left_for_later():
    state = {"bilibili-1|2026-11-26": {"n": 0, "at": 0.0}, "weibo-2|2026-11-26": {"n": 0, "at": 0.0}}
    due, _ = plan([A, B], state, now=10_000, in_flight=[A])
    assert [(item.source_key, item.day) for item in due] == [B]
    due, _ = plan([A, B], state, now=10_000, limit=1)
    assert len(due) == 1
    due, new_state = plan_rerequests([("gone-9", "2026-11-26")], {}, 10_000, registered=REGISTERED, in_flight=set())
    assert due == [] and new_state == {}


def test_a_finished_partition_forgets_its_backoff():
    state = {"bilibili-1|2026-11-26": {"n": 5, "at": 0.0}}
    _due, state = plan([], state, now=100.0)
    assert state == {}


def test_the_sensor_fails_dead_runs_and_never_requests_beside_a_live_run(crawl_home, simulator, monkeypatch):
    import subprocess
    import sys

    from dagster import DagsterInstance, DagsterRunStatus, build_sensor_context
    from dagster._core.test_utils import create_run_for_test

    from media_crawler.commands.crawl import prepare_home
    from media_crawler.config import load_config
    from media_crawler_tests.shard_support import requested_partitions, unfinished_sensor
    from media_crawler.defs.resources import crawl_resources
    from media_crawler.models import DayWindow
    from media_crawler.pipeline.discover import discover
    from media_crawler.pipeline.runtime import Runtime
    from media_crawler.recovery import rerequest
    from media_crawler.pipeline.liveness import process_token
    from media_crawler.recovery.runs import PROCESS_TAG
    from media_crawler_tests.recovery.support import write_recovery_config

    now = {"t": 1_800_000_000.0}
    monkeypatch.setattr(rerequest, "clock", lambda: now["t"])
    config = load_config(write_recovery_config(crawl_home, simulator))
    runtime = Runtime.from_config(config)
    for key, day in [("facebook-42", "2026-11-25"), ("facebook-43", "2026-11-26")]:
        discover(runtime, config.source_by_key(key), DayWindow.parse(day))
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_token = process_token(child.pid)
    child.wait()
    with DagsterInstance.ephemeral() as instance:
        prepare_home(instance, config)
        first, second = (config.layout.shard_of(key) for key in ("facebook-42", "facebook-43"))
        dead = create_run_for_test(instance, job_name="crawl", status=DagsterRunStatus.STARTED,
                                   tags={"dagster/partition": f"2026-11-25|{first}", PROCESS_TAG: dead_token})
        create_run_for_test(instance, job_name="crawl", status=DagsterRunStatus.STARTED,
                            tags={"dagster/partition": f"2026-11-26|{second}", PROCESS_TAG: process_token()})
        resources = crawl_resources(str(config.path))
        cursor = None
        requested = []
        for _ in range(2):  # notice, then request once the first wait has passed
            with build_sensor_context(instance=instance, cursor=cursor, resources=resources) as context:
                result = unfinished_sensor(config.path)(context)
                cursor = context.cursor
            requested = [key for item in result for key in requested_partitions(item)] if isinstance(result, list) else []
            now["t"] += BASE_WAIT_S + 1
        assert instance.get_run_by_id(dead.run_id).status == DagsterRunStatus.FAILURE
        assert requested == [f"2026-11-25|{first}"], "the partition with a live run is left alone"

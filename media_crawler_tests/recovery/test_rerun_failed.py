"""`rerun-failed`: which partitions it picks (failed latest run, unfinished ledger rows) and which it leaves alone."""
from __future__ import annotations

import pytest
from dagster import DagsterInstance, DagsterRunStatus
from dagster._core.test_utils import create_run_for_test

from media_crawler.cli import main as cli_main
from media_crawler.commands.crawl import prepare_home
from media_crawler.commands.rerun_failed import parse_span, rerun
from media_crawler.config import load_config
from media_crawler.pipeline.liveness import process_token
from media_crawler.recovery.runs import PROCESS_TAG, fail_dead_runs, failed_partitions
from media_crawler.store.ledger import Ledger
from media_crawler_tests.recovery.support import write_recovery_config


@pytest.fixture
def instance():
    with DagsterInstance.ephemeral() as inst:
        yield inst


def make_run(instance, partition: str, status: DagsterRunStatus, **tags):
    return create_run_for_test(instance, job_name="crawl", status=status, tags={"dagster/partition": partition, **tags})


def test_failed_partitions_take_the_latest_run_of_each_partition(instance):
    make_run(instance, "2026-11-25|weibo-678", DagsterRunStatus.FAILURE)
    make_run(instance, "2026-11-25|weibo-678", DagsterRunStatus.SUCCESS)  # fixed since
    make_run(instance, "2026-11-26|weibo-678", DagsterRunStatus.FAILURE)
    latest = make_run(instance, "2026-11-26|weibo-678", DagsterRunStatus.FAILURE)  # failed again
    other = make_run(instance, "2026-11-27|weibo-678", DagsterRunStatus.FAILURE)
    assert [(p.partition, p.run_id) for p in failed_partitions(instance)] == [
        ("2026-11-26|weibo-678", latest.run_id), ("2026-11-27|weibo-678", other.run_id)]


def test_a_ranged_run_holds_every_partition_of_its_range_in_flight(instance):
    from media_crawler.recovery.runs import in_flight_partitions
    from media_crawler.shards import range_tags

    create_run_for_test(instance, job_name="crawl", status=DagsterRunStatus.STARTING,
                        tags=range_tags("2026-11-25", ["bilibili-s02", "bilibili-s05"]))
    make_run(instance, "2026-11-25|weibo-s01", DagsterRunStatus.STARTED)
    make_run(instance, "2026-11-25|weibo-s02", DagsterRunStatus.SUCCESS)
    assert in_flight_partitions(instance) == {"2026-11-25|bilibili-s02", "2026-11-25|bilibili-s03",
                                              "2026-11-25|bilibili-s04", "2026-11-25|bilibili-s05",
                                              "2026-11-25|weibo-s01"}
    # `status` and the wait summary read the same (observe/dagster_runs.py).
    from media_crawler.observe.dagster_runs import runs_in_flight

    view = runs_in_flight(instance)
    assert view.running_partitions == in_flight_partitions(instance)
    assert view.running == {"bilibili": 1, "weibo": 1}


def test_a_partition_of_a_failed_range_run_since_succeeded_alone_is_not_failed(instance):
    from media_crawler.shards import range_tags

    create_run_for_test(instance, job_name="crawl", status=DagsterRunStatus.FAILURE,
                        tags=range_tags("2026-11-25", ["bilibili-s00", "bilibili-s01"]))
    later = make_run(instance, "2026-11-25|bilibili-s00", DagsterRunStatus.SUCCESS)
    assert later.run_id
    # The range's run committed nothing (no materialization recorded): both failed; s00 was fixed since.
    assert [p.partition for p in failed_partitions(instance)] == ["2026-11-25|bilibili-s01"]


def test_only_runs_whose_process_is_gone_are_marked_failed(instance):
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_token = process_token(child.pid)
    child.wait()
    dead = make_run(instance, "2026-11-25|weibo-678", DagsterRunStatus.STARTED, **{PROCESS_TAG: dead_token})
    alive = make_run(instance, "2026-11-26|weibo-678", DagsterRunStatus.STARTED, **{PROCESS_TAG: process_token()})
    unknown = make_run(instance, "2026-11-27|weibo-678", DagsterRunStatus.STARTED)
    assert [run.run_id for run in fail_dead_runs(instance)] == [dead.run_id]
    statuses = {run_id: instance.get_run_by_id(run_id).status for run_id in (dead.run_id, alive.run_id, unknown.run_id)}
    assert statuses == {dead.run_id: DagsterRunStatus.FAILURE, alive.run_id: DagsterRunStatus.STARTED,
                        unknown.run_id: DagsterRunStatus.STARTED}


def test_dry_run_lists_failed_and_unfinished_partitions_and_skips_busy_ones(crawl_home, simulator, instance, capsys):
    config = load_config(write_recovery_config(crawl_home, simulator))
    prepare_home(instance, config)
    weibo, bilibili, facebook = (config.layout.shard_of(key) for key in ("weibo-678", "bilibili-12345", "facebook-42"))
    empty = next(shard for shard in config.layout.shard_keys() if not config.sources_in(shard))
    make_run(instance, f"2026-11-25|{weibo}", DagsterRunStatus.FAILURE)
    make_run(instance, f"2026-11-26|{bilibili}", DagsterRunStatus.FAILURE)
    make_run(instance, f"2026-11-26|{bilibili}", DagsterRunStatus.STARTED, **{PROCESS_TAG: process_token()})
    make_run(instance, f"2026-11-25|{empty}", DagsterRunStatus.FAILURE)
    from media_crawler.models import DayWindow
    from media_crawler.pipeline.discover import discover
    from media_crawler.pipeline.runtime import Runtime

    discover(Runtime.from_config(config), config.source_by_key("facebook-42"), DayWindow.parse("2026-11-25"))
    assert Ledger(config.ledger_url).state_counts() == {"discovered": 5}
    assert rerun(str(config.path), instance=instance, dry_run=True) == 0
    err = capsys.readouterr().err
    assert f"would re-run 2026-11-25 {weibo}: latest run" in err
    assert f"would re-run 2026-11-25 {facebook}: 5 unfinished item(s) of facebook-42" in err
    assert f"would re-run 2026-11-26 {bilibili}" not in err, "its latest run is in progress: not failed (yet)"
    assert f"2026-11-25|{empty}: no source of" in err
    assert Ledger(config.ledger_url).state_counts() == {"discovered": 5}, "a dry run changes nothing"


def test_since_spans_and_the_command_line(crawl_home, simulator, monkeypatch, tmp_path):
    assert parse_span("90m").total_seconds() == 5400 and parse_span("7d").days == 7
    config = write_recovery_config(crawl_home, simulator)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    (tmp_path / "dagster_home").mkdir()
    assert cli_main(["rerun-failed", "--config", str(config), "--since", "2h", "--dry-run"]) == 0
    with pytest.raises(SystemExit):
        cli_main(["rerun-failed", "--since", "yesterday"])

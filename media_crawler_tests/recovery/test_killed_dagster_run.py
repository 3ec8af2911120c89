"""A SIGKILLed `media-crawler crawl` leaves its Dagster run STARTED: the restart fails it and the partition converges."""
from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from media_crawler.commands.crawl import crawl
from media_crawler.dagster_home import INSTANCE_TEMPLATE
from media_crawler.commands.rerun_failed import rerun
from media_crawler.config import load_config
from media_crawler.crashpoints import AFTER_LINK_BEFORE_LEDGER, CRASH_ENV
from media_crawler_sim.app import Behaviour
from media_crawler_sim.server import Simulator
from media_crawler.store.ledger import Ledger
from media_crawler_tests.recovery.support import (
    assert_converged, media_requests, partition_truth, write_recovery_config,
)
from media_crawler_tests.shard_support import partition_of


@pytest.fixture
def dagster_home(tmp_path, monkeypatch):
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(INSTANCE_TEMPLATE, home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with DagsterInstance.get() as instance:  # create the storage once, here, not in the killed child
        yield instance


def crawl_command(config, day: str, source: str) -> list[str]:
    return [sys.executable, "-m", "media_crawler.cli", "crawl", "--config", str(config), "--day", day,
            "--source", source]


def partition_runs(instance, partition: str) -> list:
    return [record.dagster_run for record in instance.get_run_records(RunsFilter(tags={"dagster/partition": partition}))]


def test_crawl_killed_between_link_and_ledger_is_failed_then_rerun_failed_finishes_it(
        crawl_home, simulator, dagster_home):
    config = load_config(write_recovery_config(crawl_home, simulator))
    killed = subprocess.run(crawl_command(config.path, "2026-11-26", "weibo-678"), capture_output=True,
                            env={**os.environ, CRASH_ENV: f"{AFTER_LINK_BEFORE_LEDGER}:3"}, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    [run] = partition_runs(dagster_home, partition_of("2026-11-26", "weibo-678"))
    assert run.status == DagsterRunStatus.STARTED, "a killed run never reports its own end"

    assert rerun(str(config.path), instance=dagster_home) == 0
    assert dagster_home.get_run_by_id(run.run_id).status == DagsterRunStatus.FAILURE
    assert [r.status for r in partition_runs(dagster_home, partition_of("2026-11-26", "weibo-678"))] == [
        DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE]
    assert_converged(config.store_root, Ledger(config.ledger_url),
                     partition_truth(simulator.truth(), [("weibo-678", "2026-11-26")]))
    assert rerun(str(config.path), instance=dagster_home) == 0  # nothing left: a no-op


def test_crawl_killed_mid_download_converges_when_crawled_again(crawl_home, dagster_home):
    with Simulator(seed=1, port=0, behaviour=Behaviour(media_latency_ms=150)) as sim:
        config = load_config(write_recovery_config(crawl_home, sim))
        start = media_requests(sim)
        child = subprocess.Popen(crawl_command(config.path, "2026-11-27", "weibo-679"),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while media_requests(sim) < start + 3 and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        child.kill()  # a few media answered, the rest in flight: a kill mid-download
        child.wait()
        assert Ledger(config.ledger_url).state_counts().get("downloading"), "the kill landed mid-download"

        outcome = crawl(config.path, ["2026-11-27"], ["weibo-679"], instance=dagster_home)
        assert not outcome.failed
        runs = partition_runs(dagster_home, partition_of("2026-11-27", "weibo-679"))
        assert [r.status for r in runs] == [DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE]
        assert_converged(config.store_root, Ledger(config.ledger_url),
                         partition_truth(sim.truth(), [("weibo-679", "2026-11-27")]))


def test_a_ranged_run_killed_after_its_first_partition_committed_is_red_not_green_and_rerun_failed_finishes_it(
        crawl_home, simulator, dagster_home):
    """A run of two shards, SIGKILLed in committed_media after the first shard's rows are committed and
    before Dagster is told: only what the run finished is green (the earlier stages of both partitions),
    committed_media is green for neither (the ledger's commit of the first is not Dagster's materialization),
    and rerun-failed re-runs the range and downloads nothing again."""
    from dagster import AssetKey

    from media_crawler.crashpoints import AFTER_COMMIT_LEDGER
    from media_crawler.defs.partitions import crawl_partitions
    from media_crawler.shards import partitions_of_run

    day = "2026-11-26"
    sources = [{"weibo": "user 678"}, {"weibo": "user 679", "api": "ajax"}]
    config = load_config(write_recovery_config(crawl_home, simulator, sources,
                                               partitions={"shards": {"weibo": 2}, "shards_per_run": 2}))
    keys = [f"{day}|weibo-s00", f"{day}|weibo-s01"]  # weibo-679 and weibo-678: one run holds both
    killed = subprocess.run([sys.executable, "-m", "media_crawler.cli", "crawl", "--config", str(config.path),
                             "--day", day], capture_output=True,
                            env={**os.environ, CRASH_ENV: f"{AFTER_COMMIT_LEDGER}:1"}, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    [run] = [record.dagster_run for record in dagster_home.get_run_records(RunsFilter())]
    assert partitions_of_run(run.tags) == keys and run.status == DagsterRunStatus.STARTED
    assert Ledger(config.ledger_url).state_counts().get("committed"), "the kill came after a partition's commit"
    media_before = media_requests(simulator)

    said = io.StringIO()
    assert rerun(str(config.path), instance=dagster_home, dry_run=True, out=said) == 0
    assert dagster_home.get_run_by_id(run.run_id).status == DagsterRunStatus.FAILURE, said.getvalue()
    # Both partitions of the dead run, the one whose rows were all committed too: Dagster never heard of it.
    first, second = [line for line in said.getvalue().splitlines() if line.startswith("would re-run")]
    assert first == f"would re-run {day} weibo-s00: latest run {run.run_id[:8]} failed", said.getvalue()
    assert second.startswith(f"would re-run {day} weibo-s01: latest run {run.run_id[:8]} failed; "), said.getvalue()
    assert second.endswith("unfinished item(s) of weibo-678 in the ledger"), said.getvalue()
    partitions_def = crawl_partitions(config.layout)

    def status(stage: str) -> dict[str, str | None]:
        found = dagster_home.get_status_by_partition(AssetKey(stage), keys, partitions_def)
        return {key: value.value if value is not None else None for key, value in found.items()}

    for stage in ("media_records", "media_downloads", "verified_media"):  # steps the run finished
        assert status(stage) == {key: "MATERIALIZED" for key in keys}, stage
    assert status("committed_media") == {key: "FAILED" for key in keys}

    assert rerun(str(config.path), instance=dagster_home) == 0
    assert status("committed_media") == {key: "MATERIALIZED" for key in keys}
    [again] = [record.dagster_run for record in dagster_home.get_run_records(RunsFilter()) if record.dagster_run.run_id
               != run.run_id]
    assert partitions_of_run(again.tags) == keys and again.status == DagsterRunStatus.SUCCESS
    assert media_requests(simulator) == media_before, "the killed run's downloads were kept"
    assert_converged(config.store_root, Ledger(config.ledger_url),
                     partition_truth(simulator.truth(), [("weibo-678", day), ("weibo-679", day)]))
    said = io.StringIO()
    assert rerun(str(config.path), instance=dagster_home, out=said) == 0 and "nothing to re-run" in said.getvalue()

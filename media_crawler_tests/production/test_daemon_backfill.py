"""A backfill of several partitions queued with `dagster job backfill` and executed by dagster-daemon, all on PostgreSQL:
with the code server the daemon starts itself (workspace.yaml), and with one run as a service of its own
(`dagster code-server start`, the daemon and the backfill loading the code location from it over gRPC)."""
from __future__ import annotations

import subprocess

import pytest
from dagster import DagsterInstance, DagsterRunStatus

from media_crawler.commands.crawl import prepare_home
from media_crawler.config import load_config
from media_crawler.deploy.services import BIN, ServiceGroup, dagster_env
from media_crawler.deploy.workers import PLATFORM_TAG
from media_crawler_tests.conftest import write_config
from media_crawler_tests.production.conftest import (
    assert_store_sound,
    expected_blobs,
    finished_runs,
    free_port,
    truth_of,
    wait_until,
    write_postgres_home,
)
from media_crawler_tests.shard_support import partition_of

SOURCES = [{"bilibili": "user 12345"}, {"weibo": "user 679", "api": "ajax"}, {"facebook": "page 42"}]
PARTS = [("2026-11-27", "bilibili-12345"), ("2026-11-27", "weibo-679"), ("2026-11-25", "facebook-42")]
PARTITIONS = [partition_of(day, source_key) for day, source_key in PARTS]


@pytest.mark.parametrize("code_server", ["started by the daemon", "a service of its own"])
def test_a_backfill_runs_every_partition_under_the_daemon(code_server, pg_env, crawl_home, simulator, tmp_path):
    dagster_home = write_postgres_home(tmp_path / "dagster_home", workers=3)
    config_path = write_config(crawl_home, simulator, SOURCES, rate_waits=False)
    env = dagster_env(dagster_home=dagster_home, config_path=config_path, media_home=crawl_home)
    config = load_config(config_path)
    with DagsterInstance.from_config(str(dagster_home)) as instance:
        # Dagster's tables are created here, once, before the daemon starts.
        prepare_home(instance, config)

    with ServiceGroup(env, log_dir=tmp_path / "logs") as services:
        port = free_port()
        if code_server == "a service of its own":
            services.start_code_server(port)
        services.start_daemon()
        subprocess.run([str(BIN / "dagster"), "job", "backfill", "-w", str(services.workspace), "-j", "crawl",
                        "--partitions", ",".join(PARTITIONS), "--noprompt"],
                       env=env, check=True, timeout=180, capture_output=True)
        with DagsterInstance.from_config(str(dagster_home)) as instance:
            runs = wait_until(lambda: finished_runs(instance, "crawl", PARTITIONS), timeout=300,
                              what="the backfill's runs", on_tick=services.check_alive)
    # Where each run was launched from: the daemon's own code server, or the one on `port`.
    origins = {run.remote_job_origin.repository_origin.code_location_origin for run in runs}
    if code_server == "a service of its own":
        assert {(type(o).__name__, o.port) for o in origins} == {("GrpcServerCodeLocationOrigin", port)}
    else:
        assert {type(o).__name__ for o in origins} == {"ManagedGrpcPythonEnvCodeLocationOrigin"}

    assert {run.status for run in runs} == {DagsterRunStatus.SUCCESS}, [(r.tags.get("dagster/partition"), r.status) for r in runs]
    assert {run.tags["dagster/partition"] for run in runs} == set(PARTITIONS)
    # Each run carries its platform: the instance's per-platform run limit counts by it.
    assert {run.tags[PLATFORM_TAG] for run in runs} == {"bilibili", "weibo", "facebook"}
    truth = truth_of(simulator)
    expected = set()
    for day, source_key in PARTS:  # each shard holds one source of this config
        expected |= expected_blobs(truth, {source_key}, {day})
    assert_store_sound(config.store_root, expected)

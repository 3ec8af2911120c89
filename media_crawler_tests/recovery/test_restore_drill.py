"""Restore drill: back up mid-crawl, keep crawling, restore elsewhere with dispatch paused, reconcile, resume; same final store."""
from __future__ import annotations

import json
import shutil
import time

from dagster import DagsterInstance, DagsterRunStatus
from dagster._core.test_utils import create_run_for_test
from sqlalchemy import update

from media_crawler.cli import main as cli_main
from media_crawler.commands.crawl import crawl
from media_crawler.dagster_home import INSTANCE_TEMPLATE
from media_crawler.commands.rerun_failed import rerun
from media_crawler.config import load_config
from media_crawler.models import DayWindow, Lease
from media_crawler.pipeline.discover import discover
from media_crawler.pipeline.runtime import Runtime
from media_crawler.recovery.backup import required_credentials
from media_crawler.recovery.dispatch import code_location_repository, instigator_running
from media_crawler.pipeline.liveness import lease_owner
from media_crawler.store.ledger import Ledger, T
from media_crawler.store.leases import claim_downloads
from media_crawler.store.schema import SCHEMA_VERSION
from media_crawler_tests.shard_support import demo_layout, partition_of
from media_crawler_tests.recovery.support import (
    assert_converged, committed_set, partition_truth, store_blobs, write_recovery_config,
)

BEFORE_BACKUP = [("weibo-678", "2026-11-26"), ("facebook-42", "2026-11-25")]
AFTER_BACKUP = ("bilibili-12345", "2026-11-26")  # being downloaded when the backup is taken
ALL = [*BEFORE_BACKUP, AFTER_BACKUP]


def crawl_each(config_path, partitions, instance) -> None:
    for source_key, day in partitions:
        outcome = crawl(config_path, [day], [source_key], instance=instance)
        assert not outcome.failed, outcome.failed


def dagster_home_at(path):
    path.mkdir(parents=True)
    shutil.copyfile(INSTANCE_TEMPLATE, path / "dagster.yaml")
    return path


def test_backup_mid_crawl_restore_elsewhere_paused_then_resume_equals_an_uninterrupted_crawl(
        tmp_path, crawl_home, simulator, capsys):
    config_a = load_config(write_recovery_config(tmp_path / "a", simulator))
    home_a = dagster_home_at(tmp_path / "a" / "dagster_home")
    with DagsterInstance.from_config(str(home_a)) as instance_a:
        crawl_each(config_a.path, BEFORE_BACKUP, instance_a)
        # Mid-crawl: the next partition's items are leased to a downloading worker, a run waits in the queue.
        runtime = Runtime.from_config(config_a)
        discover(runtime, config_a.source_by_key(AFTER_BACKUP[0]), DayWindow.parse(AFTER_BACKUP[1]))
        held = claim_downloads(runtime.ledger, source_key=AFTER_BACKUP[0], day=AFTER_BACKUP[1],
                                    lease=Lease(lease_owner("live"), 600))
        assert held
        with code_location_repository(instance_a) as repository:
            origin = repository.get_full_job("crawl").get_remote_origin()
        queued = create_run_for_test(instance_a, job_name="crawl", status=DagsterRunStatus.QUEUED,
                                     remote_job_origin=origin,
                                     tags={"dagster/partition": partition_of(AFTER_BACKUP[1], AFTER_BACKUP[0])})
        assert cli_main(["backup", "--to", str(tmp_path / "backup"), "--config", str(config_a.path),
                         "--dagster-home", str(home_a)]) == 0
        manifest = json.loads((tmp_path / "backup" / "manifest.json").read_text())
        assert manifest["leases_held"] == len(held) and manifest["dagster"] == "sqlite"
        assert manifest["ledger_schema_version"] == SCHEMA_VERSION and manifest["dagster_version"]
        assert "FB_ACCESS_TOKEN" in required_credentials(manifest["credentials"])  # set by crawl_home

        # The original keeps crawling (its downloading worker died after the backup): the reference result.
        with runtime.ledger.engine.begin() as conn:
            conn.execute(update(T).where(T.c.lease_owner.is_not(None)).values(lease_expires_at=time.time() - 1))
        crawl_each(config_a.path, [AFTER_BACKUP], instance_a)

    home_c = tmp_path / "c"
    assert cli_main(["restore", "--from", str(tmp_path / "backup"), "--home", str(home_c)]) == 0
    printed = capsys.readouterr().err
    print(printed)  # the drill's timings: "restored into ... in X s; reconciled in Y s"
    assert "restored into" in printed and "reconciled in" in printed
    assert "credentials: FB_ACCESS_TOKEN set in this environment" in printed
    assert "recovery times: copy" in printed and "first successful partition: none yet" in printed
    summary = json.loads((home_c / "restore.json").read_text())
    print(f"restore took {summary['restore_s']:.2f} s, reconcile {summary['reconcile_s']:.2f} s")
    config_c = load_config(home_c / "sources.yaml")
    ledger_c = Ledger(config_c.ledger_url)
    assert summary["reconcile"].get("dead_lease") == 1, "the lease held at backup time was uncertain"
    assert not ledger_c.tasks(states=["downloading"])
    with DagsterInstance.from_config(str(home_c / "dagster_home")) as instance_c:
        assert not any(instigator_running(instance_c).values()), "dispatch paused: no sensor, no schedule"
        assert instance_c.get_run_by_id(queued.run_id).status == DagsterRunStatus.CANCELED
        assert summary["pause"]["sensors"], "the default-running sensors were running before the pause"

        # Resume as docs/RECOVERY.md says: re-run what is unfinished (the partition in flight at backup time).
        assert rerun(str(config_c.path), instance=instance_c) == 0
        reran = capsys.readouterr().err
        shard = demo_layout().shard_of(AFTER_BACKUP[0])
        assert f"re-ran {AFTER_BACKUP[1]} {shard}" in reran and "weibo-" not in reran, reran
        assert cli_main(["restore", "--resume", "--home", str(home_c)]) == 0
        resumed = capsys.readouterr().err
        print(resumed)  # the restore record: copy, pause, reconcile, first successful partition
        first = json.loads((home_c / "restore.json").read_text())["first_successful_partition"]
        assert first["partition"] == partition_of(AFTER_BACKUP[1], AFTER_BACKUP[0]), "rerun-failed's run, after the restore"
        assert f"first successful partition: {first['after_restore_began_s']:.1f} s after the restore began" in resumed
        running = instigator_running(instance_c)
        assert {name for name, on in running.items() if on} == set(summary["pause"]["sensors"])

    assert set(store_blobs(config_c.store_root)) == set(store_blobs(config_a.store_root))
    assert committed_set(ledger_c) == committed_set(Ledger(config_a.ledger_url))
    assert_converged(config_c.store_root, ledger_c, partition_truth(simulator.truth(), ALL))

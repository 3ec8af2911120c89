"""Backup and restore on PostgreSQL (Dagster and the ledger in one database): pg_dump, pg_restore into a fresh one, paused."""
from __future__ import annotations

import shutil

import pytest
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from media_crawler.commands.crawl import crawl
from media_crawler.config import load_config
from media_crawler.environment import LEDGER_ENV
from media_crawler.deploy.services import REPO_ROOT
from media_crawler.recovery.backup import backup
from media_crawler.recovery.dispatch import instigator_running
from media_crawler.recovery.restore import restore
from media_crawler.store.ledger import Ledger
from media_crawler.store.schema import SCHEMA_VERSION
from media_crawler_tests.recovery.support import committed_set, store_blobs, write_recovery_config
from media_crawler_tests.shard_support import partition_of



@pytest.fixture
def two_databases(postgres):
    """(original, restore target): fresh databases, dropped afterwards."""
    return [postgres.create(), postgres.create()]


@pytest.mark.parametrize("to", ["folder", "bucket"])
def test_postgres_backup_restores_runs_ledger_and_store_into_a_fresh_database(
        tmp_path, crawl_home, simulator, two_databases, monkeypatch, request, to):
    """A folder, or a bucket prefix (SeaweedFS): the dump, Dagster's yaml and the blobs as keys."""
    original, target = two_databases
    destination = tmp_path / "backup"
    if to == "bucket":
        s3_server = request.getfixturevalue("s3_server")
        for name, value in s3_server.environment.items():
            monkeypatch.setenv(name, value)
        destination = s3_server.new_uri("crawl-backups")
    monkeypatch.setenv("DAGSTER_PG_URL", original)
    monkeypatch.setenv(LEDGER_ENV, original)  # production layout: one database for both
    config = load_config(write_recovery_config(crawl_home, simulator))
    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    shutil.copyfile(REPO_ROOT / "deploy" / "dagster.postgres.yaml", dagster_home / "dagster.yaml")
    with DagsterInstance.from_config(str(dagster_home)) as instance:
        assert not crawl(config.path, ["2026-11-25"], ["facebook-42"], instance=instance).failed

    manifest = backup(config, dagster_home, destination)
    assert (manifest.ledger, manifest.dagster) == ("postgres", "shared-with-ledger")
    assert manifest.ledger_schema_version == SCHEMA_VERSION, "read from the PostgreSQL ledger"
    if to == "folder":
        assert (tmp_path / "backup" / manifest.files / "ledger.pgdump").stat().st_size > 0
    else:
        keys = s3_server.keys(destination)
        assert {key.rsplit("/", 1)[1] for key in keys} >= {"ledger.pgdump", "dagster.yaml", "manifest.json"}

    summary = restore(destination, tmp_path / "restored", ledger_url=target)
    assert "postgres@" in summary.ledger_url
    assert set(store_blobs(tmp_path / "restored" / "store")) == set(store_blobs(config.store_root))
    assert committed_set(Ledger(target)) == committed_set(Ledger(original)) != set()
    monkeypatch.setenv("DAGSTER_PG_URL", target)
    with DagsterInstance.from_config(str(tmp_path / "restored" / "dagster_home")) as restored:
        runs = restored.get_run_records(RunsFilter(tags={"dagster/partition": partition_of("2026-11-25", "facebook-42")}))
        assert [record.dagster_run.status for record in runs] == [DagsterRunStatus.SUCCESS]
        assert not any(instigator_running(restored).values())

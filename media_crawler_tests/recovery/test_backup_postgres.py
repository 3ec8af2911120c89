"""Backup and restore on PostgreSQL (Dagster and the ledger in one database): pg_dump, pg_restore into a fresh one, paused."""
from __future__ import annotations

import shutil
import uuid

import pytest
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from media_crawler.commands.crawl import crawl
from media_crawler.config import LEDGER_ENV, load_config
from media_crawler.deploy.services import REPO_ROOT
from media_crawler.recovery.backup import backup
from media_crawler.recovery.dispatch import instigator_running
from media_crawler.recovery.restore import restore
from media_crawler.store.ledger import Ledger
from media_crawler_tests.conftest import require_service
from media_crawler_tests.recovery.support import committed_set, store_blobs, write_recovery_config

ADMIN = {"host": "127.0.0.1", "port": 5432, "user": "postgres", "dbname": "postgres"}


@pytest.fixture
def two_databases():
    """(original, restore target): fresh databases, dropped afterwards."""
    require_service("PostgreSQL", 5432)
    import psycopg2

    from media_crawler.store.database import dispose_engines

    admin = psycopg2.connect(**ADMIN)
    admin.autocommit = True  # CREATE/DROP DATABASE cannot run in a transaction
    names = [f"mc_recovery_{uuid.uuid4().hex[:10]}" for _ in range(2)]
    with admin.cursor() as cursor:
        for name in names:
            cursor.execute(f'CREATE DATABASE "{name}"')
    try:
        yield [f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}" for name in names]
    finally:
        dispose_engines()
        with admin.cursor() as cursor:
            for name in names:
                cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def test_postgres_backup_restores_runs_ledger_and_store_into_a_fresh_database(
        tmp_path, crawl_home, simulator, two_databases, monkeypatch):
    original, target = two_databases
    monkeypatch.setenv("DAGSTER_PG_URL", original)
    monkeypatch.setenv(LEDGER_ENV, original)  # production layout: one database for both
    config = load_config(write_recovery_config(crawl_home, simulator))
    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    shutil.copyfile(REPO_ROOT / "deploy" / "dagster.postgres.yaml", dagster_home / "dagster.yaml")
    with DagsterInstance.from_config(str(dagster_home)) as instance:
        assert not crawl(config.path, ["2026-11-25"], ["facebook-42"], instance=instance).failed

    manifest = backup(config, dagster_home, tmp_path / "backup")
    assert (manifest.ledger, manifest.dagster) == ("postgres", "shared-with-ledger")
    assert (tmp_path / "backup" / "ledger.pgdump").stat().st_size > 0

    summary = restore(tmp_path / "backup", tmp_path / "restored", ledger_url=target)
    assert "postgres@" in summary.ledger_url
    assert set(store_blobs(tmp_path / "restored" / "store")) == set(store_blobs(config.store_root))
    assert committed_set(Ledger(target)) == committed_set(Ledger(original)) != set()
    monkeypatch.setenv("DAGSTER_PG_URL", target)
    with DagsterInstance.from_config(str(tmp_path / "restored" / "dagster_home")) as restored:
        runs = restored.get_run_records(RunsFilter(tags={"dagster/partition": "2026-11-25|facebook-42"}))
        assert [record.dagster_run.status for record in runs] == [DagsterRunStatus.SUCCESS]
        assert not any(instigator_running(restored).values())

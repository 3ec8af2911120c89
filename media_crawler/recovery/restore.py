"""Restore a backup into a fresh location, dispatch paused, leases reconciled.

The new location (`home`) gets:

    store/          the backed-up blobs (staging starts empty)
    ledger.db       the ledger (a PostgreSQL backup goes into the database given instead)
    dagster_home/   Dagster's storage and its dagster.yaml
    sources.yaml    the backed-up sources file, pointed at the new store and ledger
    paused.json     the sensors and schedules that ran before the pause (resume starts them)
    restore.json    what restore did and how long it took

Then, before anything may run: dispatch is paused (dispatch.py), and the
ledger is reconciled against the restored store with every lease treated as
uncertain: the holders kept working after the snapshot, somewhere else.
Rows they were downloading go back to the queue, rows whose blob is in the
store are committed, the rest are downloaded again. Resuming is a separate,
deliberate step (`media-crawler restore --resume --home ...`).
"""
from __future__ import annotations

import json
import os
import shutil
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from media_crawler.commands.home import INSTANCE_TEMPLATE
from media_crawler.recovery import backup as layout
from media_crawler.recovery.copying import copy_blobs, copy_tree_of_sqlite, pg_restore, sqlite_copy
from media_crawler.recovery.dispatch import LOCATION_NAME, DispatchPause, pause_dispatch, resume_dispatch

RESTORE_FILE = "restore.json"
DAGSTER_PG_ENV = "DAGSTER_PG_URL"  # what deploy/dagster.postgres.yaml reads


@dataclass
class RestoreSummary:
    home: str
    ledger_url: str
    dagster_home: str
    config_path: str | None
    blobs: int = 0
    pause: dict = field(default_factory=dict)
    reconcile: dict = field(default_factory=dict)  # finding counts
    restore_s: float = 0.0
    reconcile_s: float = 0.0


def restore(backup_dir: Path, home: Path, *, ledger_url: str | None = None, dagster_pg_url: str | None = None,
            location_name: str = LOCATION_NAME) -> RestoreSummary:
    from dagster import DagsterInstance

    from media_crawler.recovery.reconcile import reconcile
    from media_crawler.store.cas import BlobStore
    from media_crawler.store.ledger import Ledger

    manifest = layout.BackupManifest.read(backup_dir)
    if home.exists() and any(home.iterdir()):
        raise FileExistsError(f"{home} is not empty: restore only into a fresh location")
    started = time.monotonic()
    home.mkdir(parents=True, exist_ok=True)
    blobs = copy_blobs(backup_dir / layout.STORE_DIR, home / "store", verify=False)  # checked when backed up
    ledger_url = _restore_ledger(manifest, backup_dir, home, ledger_url)
    dagster_home, dagster_pg_url = _restore_dagster(manifest, backup_dir, home, ledger_url, dagster_pg_url)
    config_path = _restore_config(manifest, backup_dir, home, ledger_url)
    summary = RestoreSummary(str(home), _display(ledger_url), str(dagster_home), config_path, blobs.copied)
    with _environment(DAGSTER_PG_ENV, dagster_pg_url), DagsterInstance.from_config(str(dagster_home)) as instance:
        pause = pause_dispatch(instance, location_name)
    pause.write(home)
    summary.pause = asdict(pause)
    summary.restore_s = time.monotonic() - started

    started = time.monotonic()
    report = reconcile(Ledger(ledger_url), BlobStore(home / "store").ensure(), repair=True, uncertain_leases=True,
                       part_grace_s=0.0)
    summary.reconcile = dict(report.counts())
    summary.reconcile_s = time.monotonic() - started
    (home / RESTORE_FILE).write_text(json.dumps(asdict(summary), indent=2))
    return summary


def resume(home: Path, *, dagster_pg_url: str | None = None, location_name: str = LOCATION_NAME) -> list[str]:
    """Start again what ran before the pause; returns the sensor and schedule names."""
    from dagster import DagsterInstance

    with _environment(DAGSTER_PG_ENV, dagster_pg_url), \
            DagsterInstance.from_config(str(home / "dagster_home")) as instance:
        return resume_dispatch(instance, DispatchPause.read(home), location_name)


def _restore_ledger(manifest, backup_dir: Path, home: Path, ledger_url: str | None) -> str:
    if manifest.ledger == "sqlite":
        sqlite_copy(backup_dir / layout.LEDGER_SQLITE, home / "ledger.db")
        return f"sqlite:///{home / 'ledger.db'}"
    if not ledger_url:
        raise ValueError("a PostgreSQL backup needs --ledger-url: an empty database to restore into")
    pg_restore(backup_dir / layout.LEDGER_PGDUMP, ledger_url)
    return ledger_url


def _restore_dagster(manifest, backup_dir: Path, home: Path, ledger_url: str,
                     dagster_pg_url: str | None) -> tuple[Path, str | None]:
    target = home / "dagster_home"
    if manifest.dagster == "sqlite":
        copy_tree_of_sqlite(backup_dir / layout.DAGSTER_DIR, target)
        return target, None
    target.mkdir(parents=True)
    if manifest.dagster == "none":
        shutil.copyfile(INSTANCE_TEMPLATE, target / "dagster.yaml")
        return target, None
    shutil.copyfile(backup_dir / layout.DAGSTER_DIR / "dagster.yaml", target / "dagster.yaml")
    if manifest.dagster == "shared-with-ledger":
        return target, dagster_pg_url or ledger_url  # restored with the ledger's dump
    if not dagster_pg_url:
        raise ValueError("this backup's Dagster storage is on PostgreSQL: pass --dagster-pg-url (an empty database)")
    pg_restore(backup_dir / layout.DAGSTER_PGDUMP, dagster_pg_url)
    return target, dagster_pg_url


def _restore_config(manifest, backup_dir: Path, home: Path, ledger_url: str) -> str | None:
    if not manifest.config:
        return None
    raw = yaml.safe_load((backup_dir / manifest.config).read_text()) or {}
    raw["store"] = str(home / "store")
    if ledger_url.startswith("sqlite"):
        raw["ledger_url"] = ledger_url
    else:
        raw.pop("ledger_url", None)  # a PostgreSQL URL may carry a password: MEDIA_CRAWLER_LEDGER_URL supplies it
    path = home / "sources.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return str(path)


def _display(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


@contextmanager
def _environment(name: str, value: str | None):
    """Set one environment variable for a block (when value is not None)."""
    saved = os.environ.get(name)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        if value is not None:
            if saved is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = saved

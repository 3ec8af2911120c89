"""Back up a crawl while it runs: Dagster's storage, the ledger, then the store.

The order is what makes a live backup restorable. Each database is copied as
one consistent snapshot, and each later copy is newer than the earlier one:

1. Dagster's storage first: its runs are then no newer than the ledger, so a
   run it shows as finished really finished before the ledger snapshot.
2. The ledger next: every row it says is committed had its blob linked into
   the store before that (commit links first, then updates the row), and
3. the store last: blobs are never removed, so every blob a committed row
   names is copied. Blobs committed after the ledger snapshot come along as
   orphans, which restore keeps and the resumed crawl adopts.

Leases held at backup time are recorded in the manifest; they are uncertain
by nature (the holder kept working after the snapshot) and restore treats them
so. Staging .part files are not backed up: a restore re-downloads those items.
"""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sqlalchemy import create_engine, func, select

from media_crawler.config import CrawlConfig
from media_crawler.recovery.copying import (
    BlobCopy, copy_blobs, copy_tree_of_sqlite, is_postgres, pg_dump, sqlite_copy, sqlite_path,
)
from media_crawler.store.ledger import T

MANIFEST = "manifest.json"
LEDGER_SQLITE, LEDGER_PGDUMP = "ledger.db", "ledger.pgdump"
DAGSTER_DIR, DAGSTER_PGDUMP = "dagster_home", "dagster.pgdump"
STORE_DIR, CONFIG_COPY = "store", "sources.yaml"
FORMAT = 1


@dataclass
class BackupManifest:
    format: int = FORMAT
    started_at: float = 0.0
    finished_at: float = 0.0
    ledger: str = ""  # "sqlite" | "postgres"
    dagster: str = ""  # "sqlite" | "postgres" | "shared-with-ledger" | "none"
    dagster_files: list[str] = field(default_factory=list)
    blobs: dict = field(default_factory=dict)
    leases_held: int = 0  # rows leased at snapshot time: uncertain, restore re-checks them
    config: str | None = None

    def write(self, folder: Path) -> None:
        (folder / MANIFEST).write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def read(cls, folder: Path) -> "BackupManifest":
        path = folder / MANIFEST
        if not path.is_file():
            raise FileNotFoundError(f"{folder} is not a media-crawler backup (no {MANIFEST})")
        return cls(**json.loads(path.read_text()))


def dagster_postgres_url(dagster_home: Path) -> str | None:
    """The PostgreSQL URL of the instance's run storage, when it is on PostgreSQL."""
    from dagster import DagsterInstance

    with DagsterInstance.from_config(str(dagster_home)) as instance:
        return getattr(instance.run_storage, "postgres_url", None)


def backup(config: CrawlConfig, dagster_home: Path | None, dest: Path) -> BackupManifest:
    """Back up into `dest` (created; an earlier backup there is refreshed, blobs incrementally)."""
    dest.mkdir(parents=True, exist_ok=True)
    manifest = BackupManifest(started_at=time.time())
    dagster_url = dagster_postgres_url(dagster_home) if dagster_home else None
    # 1. Dagster's storage.
    if dagster_home is None:
        manifest.dagster = "none"
    elif dagster_url is None:
        manifest.dagster = "sqlite"
        shutil.rmtree(dest / DAGSTER_DIR, ignore_errors=True)  # runs deleted since the last backup go too
        manifest.dagster_files = copy_tree_of_sqlite(dagster_home, dest / DAGSTER_DIR)
    else:
        manifest.dagster_files = _copy_instance_yaml(dagster_home, dest / DAGSTER_DIR)
        if _same_database(dagster_url, config.ledger_url):
            manifest.dagster = "shared-with-ledger"  # the ledger's dump below holds Dagster's tables too
        else:
            manifest.dagster = "postgres"
            pg_dump(dagster_url, dest / DAGSTER_PGDUMP)
    # 2. The ledger.
    ledger_file = sqlite_path(config.ledger_url)
    if ledger_file is not None:
        manifest.ledger = "sqlite"
        sqlite_copy(ledger_file, dest / LEDGER_SQLITE)
        manifest.leases_held = _leases_in(f"sqlite:///{dest / LEDGER_SQLITE}")
    elif is_postgres(config.ledger_url):
        manifest.ledger = "postgres"
        pg_dump(config.ledger_url, dest / LEDGER_PGDUMP)
        manifest.leases_held = _leases_in(config.ledger_url)  # approximately: read after the dump
    else:
        raise ValueError(f"cannot back up a ledger at {config.ledger_url.split('://')[0]}://")
    # 3. The store, last.
    copied: BlobCopy = copy_blobs(config.store_root, dest / STORE_DIR)
    manifest.blobs = asdict(copied)
    if config.path is not None and config.path.is_file():
        shutil.copyfile(config.path, dest / CONFIG_COPY)
        manifest.config = CONFIG_COPY
    manifest.finished_at = time.time()
    manifest.write(dest)
    return manifest


def _copy_instance_yaml(dagster_home: Path, target: Path) -> list[str]:
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(dagster_home / "dagster.yaml", target / "dagster.yaml")
    return ["dagster.yaml"]


def _same_database(first: str, second: str) -> bool:
    from sqlalchemy.engine import make_url

    a, b = make_url(first), make_url(second)
    return (a.host, a.port or 5432, a.database) == (b.host, b.port or 5432, b.database)


def _leases_in(url: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(select(func.count()).where(T.c.lease_owner.is_not(None))).scalar() or 0
    finally:
        engine.dispose()

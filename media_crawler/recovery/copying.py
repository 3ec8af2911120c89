"""Consistent copies of what a crawl keeps: SQLite databases, PostgreSQL databases, blobs.

- SQLite: the sqlite3 backup API copies a live database (WAL and all) as one
  consistent snapshot, which copying the file while a crawl writes does not.
- PostgreSQL: `pg_dump --format=custom` / `pg_restore`; the password travels
  in PGPASSWORD, never on a command line other users can read.
- Blobs: named by their hash, so a copy is checked against its name while it
  is read and put into the target store if absent (store/blob_store.py): a
  backup never holds a half-copied or silently corrupt blob, and a second
  backup into the same folder copies only new blobs.
"""
from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from media_crawler.environment import environment_copy
from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.store.blob_store import BlobStore
from media_crawler.store.urls import libpq_url


def sqlite_copy(source: Path, target: Path) -> None:
    """Snapshot `source` into `target` (replaced atomically)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    with closing(sqlite3.connect(str(source), timeout=60)) as src, closing(sqlite3.connect(str(partial))) as dst:
        src.backup(dst)  # pages=-1: the whole database in one step, under one read transaction
    os.replace(partial, target)


def _libpq(url: str) -> tuple[str, dict[str, str]]:
    """(URL for pg_dump/pg_restore without driver or password, environment with PGPASSWORD)."""
    dsn, password = libpq_url(url)
    env = environment_copy()
    if password:
        env["PGPASSWORD"] = password
    return dsn, env


def pg_dump(url: str, target: Path) -> None:
    dsn, env = _libpq(url)
    subprocess.run(["pg_dump", "--format=custom", "--no-owner", "--file", str(target), "--dbname", dsn],
                   check=True, env=env, capture_output=True)


def pg_restore(dump: Path, url: str) -> None:
    """Into an empty database (the restore target is a fresh location)."""
    dsn, env = _libpq(url)
    subprocess.run(["pg_restore", "--no-owner", "--exit-on-error", "--dbname", dsn, str(dump)],
                   check=True, env=env, capture_output=True)


COPY_BATCH = 1000


@dataclass
class BlobCopy:
    copied: int = 0
    already_there: int = 0
    bytes: int = 0
    corrupt: list[str] = field(default_factory=list)  # source blobs whose bytes do not match their name


def copy_blobs(source: BlobStore, target: BlobStore, after_each=None) -> BlobCopy:
    """Copy every blob of `source` into `target`, skipping blobs already there whole.

    Each copy is a put-if-absent from a stream, so it is checked against its name
    on the way (a source blob that fails is listed in `corrupt`, not copied) and a
    target never holds half a blob. A target blob of another size than the source's
    is quarantined in the target and copied again. One flush of the target per
    COPY_BATCH blobs (a batch's staged names wait for it in memory). `after_each`: called
    after each blob (backup's crash point).
    """
    result = BlobCopy()
    names = sorted(source.iter_sha256s())
    for start in range(0, len(names), COPY_BATCH):
        with target.deferred_sync():
            for sha256 in names[start:start + COPY_BATCH]:
                _copy_blob(source, target, sha256, result)
                if after_each is not None:
                    after_each()
    return result


def _copy_blob(source: BlobStore, target: BlobStore, sha256: str, result: BlobCopy) -> None:
    size = source.size(sha256)
    try:
        there = target.size(sha256)  # one question, not exists() then size(): a HEAD each on a bucket
    except FileNotFoundError:
        there = None
    if there is not None:
        if there == size:
            result.already_there += 1
            return
        target.quarantine(sha256)
    try:
        with source.open(sha256) as stream:
            stored = target.put_stream_if_absent(stream, sha256)
    except CrawlError as error:
        if error.error_class is not ErrorClass.HASH_MISMATCH:
            raise
        result.corrupt.append(sha256)
        return
    result.copied += 1
    result.bytes += stored.size


def copy_tree_of_sqlite(source: Path, target: Path) -> list[str]:
    """Copy a folder (a DAGSTER_HOME): *.db through the backup API, other files as they are,
    SQLite's -wal/-shm/-journal files never (the snapshots already include them)."""
    copied = []
    for path in sorted(source.rglob("*")):
        if not path.is_file() or path.name.endswith(("-wal", "-shm", "-journal", ".partial")):
            continue
        destination = target / path.relative_to(source)
        destination.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".db":
            sqlite_copy(path, destination)
        else:
            shutil.copy2(path, destination)
        copied.append(str(path.relative_to(source)))
    return copied

"""Consistent copies of what a crawl keeps: SQLite databases, PostgreSQL databases, blobs.

- SQLite: the sqlite3 backup API copies a live database (WAL and all) as one
  consistent snapshot, which copying the file while a crawl writes does not.
- PostgreSQL: `pg_dump --format=custom` / `pg_restore`; the password travels
  in PGPASSWORD, never on a command line other users can read.
- Blobs: named by their hash, so a copy is checked against its name while it
  is read, written under a temporary name and renamed: a backup never holds a
  half-copied or silently corrupt blob, and a second backup into the same
  folder copies only new blobs.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from media_crawler.config import environment_copy
from media_crawler.store.cas import CHUNK
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


@dataclass
class BlobCopy:
    copied: int = 0
    already_there: int = 0
    bytes: int = 0
    corrupt: list[str] = field(default_factory=list)  # source blobs whose bytes do not match their name


def copy_blobs(source_root: Path, target_root: Path, *, verify: bool = True) -> BlobCopy:
    """Copy <source_root>/sha256/** into <target_root>/sha256/**, skipping blobs already there."""
    result = BlobCopy()
    for path in sorted((source_root / "sha256").glob("*/*/*")):
        if not path.is_file():
            continue
        target = target_root / path.relative_to(source_root)
        if target.is_file() and target.stat().st_size == path.stat().st_size:
            result.already_there += 1
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        if _copy_checked(path, partial, verify):
            os.replace(partial, target)
            result.copied += 1
            result.bytes += target.stat().st_size
        else:
            partial.unlink(missing_ok=True)
            result.corrupt.append(path.name)
    return result


def _copy_checked(source: Path, target: Path, verify: bool) -> bool:
    """Copy, hashing on the way; False when the bytes do not hash to the blob's name."""
    if not verify:
        shutil.copyfile(source, target)
        return True
    digest = hashlib.sha256()
    with open(source, "rb") as src, open(target, "wb") as dst:
        while chunk := src.read(CHUNK):
            digest.update(chunk)
            dst.write(chunk)
        dst.flush()
        os.fsync(dst.fileno())
    return digest.hexdigest() == source.name


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

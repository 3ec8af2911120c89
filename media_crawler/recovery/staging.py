"""Staging names of content already in the store: what a crash between link and unlink leaves.

A commit links the staged file under its hash, fsyncs the folder, then drops
the staging name (store/cas.py). A process killed between the link and the
unlink (the folder's fsync is most of that window) leaves
`staging/task-<id>.part` as a second name of a committed blob. The ledger
row is then still `downloading` (fetch-urls writes its transitions in
batches after the commit) or `verified` (the Dagster commit stage), its
lease dead. The restart commits the row without looking at staging
(fetch-urls finds the expected hash stored and skips the download; the
commit stage finds the blob and only drops the name), and in the first case
the name stays for good: a store that differs from a clean run's.

Left there, the name is also a way into a committed blob: a download of that
row which resumes into it (a row whose feed announced no hash is downloaded
again, from the validator it recorded) would append to the blob's own bytes.

`remove_committed_staging` drops such names, and only those:

- a .part that is the same file (device and inode) as a blob under sha256/:
  the blob its row recorded or its feed announced, else (a muxed file, a row
  that recorded no hash, a name with no row) the blob its bytes hash to. Its
  bytes stay whole under their hash; removing the name loses nothing, so it is
  safe at any moment, beside a live commit (whose unlink tolerates a missing
  name) or a live run;
- a .part of a row that is committed, when that row's blob is stored: the row
  is finished and nothing will read the file again. (The row could be
  re-queued by a reconcile beside this sweep and its download start at that
  name; the file is re-examined right before the unlink and kept if it changed.)

Everything else is left alone: a .part with one name whose row is unfinished is
a download in progress or a resumable one, and reconcile judges the rest.
Call it where a run starts handing out downloads (after its claim, so a row it
now holds cannot be linked by anyone else any more).
"""
from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Iterable

from media_crawler.store.blob_rows import rows_by_id
from media_crawler.store.cas import BlobStore, file_sha256
from media_crawler.store.ledger import COMMITTED, Ledger

_TASK_PART = re.compile(r"^task-(\d+)\.part$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
LOG = logging.getLogger("media_crawler.recovery")
SHOWN_IN_LOG = 20


def linked_blob(store: BlobStore, part: Path, hints: Iterable[str | None] = (), *, st: os.stat_result | None = None,
                may_hash: bool = True) -> Path | None:
    """The blob `part` is another name of (same device and inode), or None.

    hints: hashes the file probably has (its row's sha256, the feed's); when
    none of them is it and may_hash, the file is hashed to find its name. A
    file with one link is no blob's other name, and is never read.
    """
    try:
        st = st or part.lstat()
    except FileNotFoundError:
        return None
    if st.st_nlink < 2 or not part.is_file():
        return None
    candidates = [hint.lower() for hint in hints if hint and _HEX64.match(hint.lower())]
    for sha256 in dict.fromkeys(candidates):
        if _same_file(store.path_for(sha256), st):
            return store.path_for(sha256)
    if not may_hash:
        return None
    try:
        digest = file_sha256(part)
    except FileNotFoundError:
        return None
    blob = store.path_for(digest)
    return blob if _same_file(blob, st) else None


def remove_committed_staging(store: BlobStore, ledger: Ledger | None = None) -> list[Path]:
    """Remove the staging names of committed content (module docstring); returns the names removed.

    ledger: where `task-<id>` rows are looked up (without it, only .part files
    that are a blob's second name are recognized, by hashing them)."""
    parts = _staged_parts(store)
    if not parts:
        return []
    rows = rows_by_id(ledger, [task_id for _path, _st, task_id in parts if task_id is not None]) if ledger else {}
    removed = []
    for path, st, task_id in parts:
        row = rows.get(task_id) if task_id is not None else None
        hints = (row.sha256, row.expected_sha256) if row else ()
        if linked_blob(store, path, hints, st=st) is not None:
            if _unlink(path):
                removed.append(path)
            continue
        if row is not None and row.state == COMMITTED and row.sha256 and store.has(row.sha256) \
                and _unchanged(path, st) and _unlink(path):
            removed.append(path)
    if removed:
        LOG.info(f"removed {len(removed)} staging name(s) of content already in the store",
                 extra={"event": "staging_names_removed", "count": len(removed),
                        "names": [path.name for path in removed[:SHOWN_IN_LOG]]})
    return removed


def _staged_parts(store: BlobStore) -> list[tuple[Path, os.stat_result, int | None]]:
    found = []
    try:
        entries = list(os.scandir(store.staging))
    except FileNotFoundError:
        return []
    for entry in entries:
        if not entry.name.endswith(".part"):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue  # committed or removed meanwhile
        match = _TASK_PART.match(entry.name)
        found.append((Path(entry.path), st, int(match.group(1)) if match else None))
    return found


def _same_file(path: Path, st: os.stat_result) -> bool:
    try:
        other = path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return False
    return (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino)


def _unchanged(path: Path, st: os.stat_result) -> bool:
    """Still the file that was examined: same inode, size and modification time."""
    try:
        now = path.lstat()
    except FileNotFoundError:
        return False
    return (now.st_ino, now.st_size, now.st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
        return True
    except FileNotFoundError:
        return False  # a live commit dropped it first

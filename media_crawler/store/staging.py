"""Staging names of content already in the store: what a crash between link and unlink leaves.

A filesystem store's put links the staged file under its hash, fsyncs the
folder, then drops the staging name (store/cas.py). A process killed between the link and the
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

- a .part that is another name of a stored blob (`BlobStore.stored_name_of`):
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

from media_crawler.store.blob_rows import rows_by_id
from media_crawler.store.blob_store import BlobStore
from media_crawler.store.ledger import COMMITTED, Ledger

_TASK_PART = re.compile(r"^task-(\d+)\.part$")
LOG = logging.getLogger("media_crawler.recovery")
SHOWN_IN_LOG = 20


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
        if store.stored_name_of(path, hints) is not None:
            if _unlink(path):
                removed.append(path)
            continue
        if row is not None and row.state == COMMITTED and row.sha256 and store.exists(row.sha256) \
                and _unchanged(path, st) and _unlink(path):
            removed.append(path)
    if removed:
        LOG.info(f"removed {len(removed)} staging name(s) of content already in the store",
                 extra={"event": "staging_names_removed", "count": len(removed),
                        "names": [path.name for path in removed[:SHOWN_IN_LOG]]})
    return removed


def _staged_parts(store: BlobStore) -> list[tuple[Path, os.stat_result, int | None]]:
    found = []
    for path in store.iter_parts():
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue  # committed or removed meanwhile
        match = _TASK_PART.match(path.name)
        found.append((path, st, int(match.group(1)) if match else None))
    return found


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

"""Named crash points: where the kill-anywhere tests SIGKILL a crawl.

    MEDIA_CRAWLER_CRASH_AT=after_link_before_ledger      # the first time the point is reached
    MEDIA_CRAWLER_CRASH_AT=after_part_write:3            # the third time

A crash point is a `crash_point("name")` call between two steps whose order
matters for recovery (bytes on disk before the ledger knows, the store's link
before the ledger row, half a ledger transaction). The variable is read once per
process (and again in a forked child, which may have been given its own), so an
unset point costs a global's read: fetch-urls passes several per item. Set, the
process kills itself with SIGKILL: no `finally`, no atexit, no flushed buffers,
exactly what a power cut or the OOM killer does.
"""
from __future__ import annotations

import os
import signal
import threading
from collections import Counter

from media_crawler.environment import CRASH_ENV, crash_point_spec

# Every point, in pipeline order. Tests iterate over this list.
AFTER_DISCOVERY_BATCH = "after_discovery_batch"  # rows inserted, later pages not yet read
AFTER_CLAIM = "after_claim"  # items leased to this process, nothing downloaded yet
AFTER_PART_WRITE = "after_part_write"  # a whole .part is on disk, the ledger still says downloading
MID_LEDGER_BATCH = "mid_ledger_batch"  # inside a batched ledger transaction, half applied
AFTER_DOWNLOAD_LEDGER = "after_download_ledger"  # a download batch recorded, verify not started
AFTER_VERIFY = "after_verify"  # items verified on disk, the ledger not yet told
AFTER_LINK_BEFORE_LEDGER = "after_link_before_ledger"  # the blob is in the store, the row still says verified
AFTER_COMMIT_LEDGER = "after_commit_ledger"  # rows committed, Dagster not yet told
POINTS = (
    AFTER_DISCOVERY_BATCH, AFTER_CLAIM, AFTER_PART_WRITE, MID_LEDGER_BATCH, AFTER_DOWNLOAD_LEDGER,
    AFTER_VERIFY, AFTER_LINK_BEFORE_LEDGER, AFTER_COMMIT_LEDGER,
)

# Points of the maintenance commands, outside a crawl (a crawl never reaches them, so the
# crawl's kill-anywhere test does not iterate over them).
AFTER_ANSWER_ROWS_RELEASED = "after_answer_rows_released"  # compact: old answer rows gone, their blobs not yet
# compact's sweep (store/answer_release.py): a blob deleted, its pending mark not yet replaced
AFTER_ANSWER_BLOB_DELETED = "after_answer_blob_deleted"
# backup (recovery/backup.py publish_backup): between the steps of its publish order.
AFTER_BACKUP_SNAPSHOTS = "after_backup_snapshots"  # databases snapshotted locally, no blob copied yet
AFTER_BACKUP_BLOB = "after_backup_blob"  # one more blob copied (":n": after the nth)
AFTER_BACKUP_FILE = "after_backup_file"  # one more file published (":1": the ledger), manifest not yet
AFTER_BACKUP_MANIFEST = "after_backup_manifest"  # the manifest published, the older files not yet removed
MAINTENANCE_POINTS = (AFTER_ANSWER_ROWS_RELEASED, AFTER_ANSWER_BLOB_DELETED, AFTER_BACKUP_SNAPSHOTS,
                      AFTER_BACKUP_BLOB, AFTER_BACKUP_FILE, AFTER_BACKUP_MANIFEST)

_hits: Counter[str] = Counter()
_lock = threading.Lock()
_UNREAD = object()
_wanted: object = _UNREAD  # parse_target() of the variable, once read


def _forget_wanted() -> None:
    global _wanted
    _wanted = _UNREAD


# A forked child (a test's crawl worker) sets the variable after the fork: read it afresh there.
os.register_at_fork(after_in_child=_forget_wanted)


def parse_target(value: str | None) -> tuple[str, int] | None:
    """'name' or 'name:n' -> (name, n); None when unset."""
    if not value:
        return None
    name, _, nth = value.partition(":")
    known = POINTS + MAINTENANCE_POINTS
    if name not in known:
        raise ValueError(f"{CRASH_ENV}={value!r}: unknown crash point (known: {', '.join(known)})")
    return name, int(nth or 1)


def crash_point(name: str) -> None:
    """Kill this process here if MEDIA_CRAWLER_CRASH_AT names this point (and this hit)."""
    global _wanted
    wanted = _wanted
    if wanted is _UNREAD:
        wanted = _wanted = parse_target(crash_point_spec())
    if wanted is None or wanted[0] != name:
        return
    with _lock:  # download threads reach the same point concurrently
        _hits[name] += 1
        if _hits[name] != wanted[1]:
            return
    os.kill(os.getpid(), signal.SIGKILL)

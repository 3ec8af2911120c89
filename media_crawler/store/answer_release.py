"""Releasing the API answers kept longer than wanted (`compact --answers-older-than 90d`).

Two steps, in this order, so that a crash anywhere leaves a ledger whose every answer row
still has its blob (an export of it stays whole):

1. the rows of the answers fetched before the cut-off are deleted (in batches, each a
   transaction: a crash between two leaves older rows for the next run, never a row
   without its blob);
2. the sweep: every blob of the answer store that no row names is deleted. Identical
   answers are one blob, so a blob a newer fetch still names stays. The sweep reads the
   store, not the rows deleted in step 1, so it also deletes what a crash left: the
   blobs of rows a killed compact deleted (crash point `after_answer_rows_released`),
   and a blob whose row a killed crawl never wrote. A restart converges to what a
   clean run leaves.

A blob is deleted in two transactions, each holding answer writers off (store/answers.py
`hold_answer_writers`): the first sees that no row names it and marks it pending
(mc_answer_releases), and commits; the second deletes it and replaces the mark by a
released one. A crawl keeping an answer with these bytes meanwhile writes no row while
the mark is pending, and stores the blob again once it sees the released mark
(store/answers.py says why no row can name a deleted blob). A sweep killed between the two
leaves pending marks: the next sweep (compact, `reconcile --repair`) finishes them first.
The deletes are calls to the store made while writers are held off (an object store's
are round trips): a compact's, at most SWEEP_BATCH of them a transaction; keeping an
answer makes none inside its transaction. Media blobs are never deleted
(store/blob_store.py `ReleasableBlobs` says why).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from itertools import islice
from typing import Iterator

from sqlalchemy import delete, func, select

from media_crawler.crashpoints import AFTER_ANSWER_BLOB_DELETED, AFTER_ANSWER_ROWS_RELEASED, crash_point
from media_crawler.store import schema
from media_crawler.store.answers import hold_answer_writers
from media_crawler.store.blob_store import BlobStore, ReleasableBlobs
from media_crawler.store.ledger import Ledger

A = schema.api_answers
R = schema.answer_releases
ROW_BATCH = 5_000
# Blobs checked and deleted per transaction: answer writers wait for one batch at most.
SWEEP_BATCH = 200
# Released marks are pruned this long after the delete: a keeper needs a mark only between
# taking its own and writing its row (store/answers.py MARK_FRESH_S, an hour at most).
MARKS_KEPT_S = 86_400.0


@dataclass
class AnswerRelease:
    rows: int = 0  # answer rows deleted
    row_bytes: int = 0  # the bytes those rows counted (status and the metrics sum these)
    blobs: int = 0  # blobs deleted: no row names them any more


def release_answers(ledger: Ledger, store: BlobStore, *, before: float, dry_run: bool = False) -> AnswerRelease:
    """Release the answers fetched before `before` (unix time): the module docstring.
    dry_run: count what would go, change nothing."""
    if not isinstance(store, ReleasableBlobs):
        raise TypeError(f"{type(store).__name__} cannot release blobs")
    done = AnswerRelease()
    old = A.c.fetched_at < before
    if dry_run:
        with ledger.engine.connect() as conn:
            done.rows, done.row_bytes = conn.execute(
                select(func.count(), func.coalesce(func.sum(A.c.size), 0)).where(old)).one()
        done.blobs = sum(len(_unnamed(ledger, batch, kept_since=before)) for batch in _batches(store.iter_sha256s()))
        return done
    while True:
        with ledger.engine.begin() as conn:
            batch = conn.execute(select(A.c.id, A.c.size).where(old).limit(ROW_BATCH)).all()
            if not batch:
                break
            done.rows += conn.execute(delete(A).where(A.c.id.in_([row.id for row in batch]))).rowcount
            done.row_bytes += sum(row.size for row in batch)
    crash_point(AFTER_ANSWER_ROWS_RELEASED)
    done.blobs = sweep_unnamed(ledger, store)
    return done


def sweep_unnamed(ledger: Ledger, store: BlobStore, *, dry_run: bool = False) -> int:
    """Delete every answer blob no row names (dry_run: count them); returns how many."""
    if dry_run:
        return sum(1 for _name in unnamed_answer_blobs(ledger, store))
    # First what a killed sweep left marked pending, then every blob of the store.
    released = sum(_delete_marked(ledger, store, batch) for batch in _batches(iter(pending_releases(ledger))))
    for batch in _batches(store.iter_sha256s()):
        released += _delete_marked(ledger, store, _mark_unnamed(ledger, batch))
    return released


def pending_releases(ledger: Ledger) -> list[str]:
    """The blobs marked pending now: none but while a sweep runs, or what a killed one left."""
    with ledger.engine.connect() as conn:
        return list(conn.execute(select(R.c.sha256).where(R.c.pending == 1).distinct()).scalars())


def _mark_unnamed(ledger: Ledger, batch: list[str]) -> list[str]:
    """The first transaction: mark pending the blobs of `batch` no row names (committed
    before any is deleted); prune released marks older than MARKS_KEPT_S."""
    now = time.time()
    with ledger.engine.begin() as conn:
        hold_answer_writers(conn)
        conn.execute(delete(R).where(R.c.pending == 0, R.c.marked_at < now - MARKS_KEPT_S))
        unnamed = _unnamed_in(conn, batch)
        if unnamed:
            conn.execute(R.insert(), [{"sha256": sha256, "pending": 1, "marked_at": now} for sha256 in unnamed])
    return unnamed


def _delete_marked(ledger: Ledger, store: BlobStore, marked: list[str]) -> int:
    """The second transaction: delete the blobs still marked pending (another sweep may
    have finished them) and mark them released, under new ids. Rows cannot name a blob
    while it is pending (store/answers.py); checked again all the same, since a named
    blob must never go."""
    if not marked:
        return 0
    with ledger.engine.begin() as conn:
        hold_answer_writers(conn)
        still = set(conn.execute(select(R.c.sha256).where(R.c.pending == 1, R.c.sha256.in_(marked))).scalars())
        doomed = _unnamed_in(conn, sorted(still))
        for sha256 in doomed:
            store.release(sha256)
            crash_point(AFTER_ANSWER_BLOB_DELETED)
        conn.execute(delete(R).where(R.c.pending == 1, R.c.sha256.in_(sorted(still))))
        if doomed:
            conn.execute(R.insert(), [{"sha256": sha256, "pending": 0, "marked_at": time.time()} for sha256 in doomed])
    return len(doomed)


def unnamed_answer_blobs(ledger: Ledger, store: BlobStore) -> Iterator[str]:
    """The answer blobs no row names now (what `sweep_unnamed` would delete)."""
    for batch in _batches(store.iter_sha256s()):
        yield from _unnamed(ledger, batch)


def _batches(names: Iterator[str]) -> Iterator[list[str]]:
    while batch := list(islice(names, SWEEP_BATCH)):
        yield batch


def _unnamed(ledger: Ledger, batch: list[str], *, kept_since: float | None = None) -> list[str]:
    with ledger.engine.connect() as conn:
        return _unnamed_in(conn, batch, kept_since=kept_since)


def _unnamed_in(conn, batch: list[str], *, kept_since: float | None = None) -> list[str]:
    """The names in `batch` no answer row names (kept_since: counting only rows fetched
    since then, the ones a release would keep)."""
    query = select(A.c.sha256).where(A.c.sha256.in_(batch)).distinct()
    if kept_since is not None:
        query = query.where(A.c.fetched_at >= kept_since)
    named = set(conn.execute(query).scalars())
    return [sha256 for sha256 in batch if sha256 not in named]

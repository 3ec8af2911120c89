"""The ledger's rows of the API answers kept as fetched (mc_api_answers, schema version 8).

A row names its answer's body by sha256 (a blob of the answer store,
store/open_store.py `open_answer_store`) and holds what is not the body: the
platform, the scrubbed URL, when it was fetched, the status line and the headers
(scrubbed by pipeline/answers.py before they get here).

A blob may be released (store/answer_release.py) once no row names it, so a row must not
be written for a blob the sweep is deleting or has deleted since the keeper stored it.
The sweep says so in the ledger (mc_answer_releases, schema version 9), and the row's
transaction reads that, with no call to the store while it is open (on SQLite it holds
the database's write lock; an object store's call is a round trip):

1. the keeper takes `release_mark` (the newest mark's id), then stores the blob (a look
   and a put-if-absent), outside any transaction;
2. `record_answer`: INSERT the row, then look for a mark of this blob that is pending or
   newer than the keeper's: if there is one, roll back and the keeper starts again at 1
   (it stores the blob again after the delete); if none, commit.

Why no row can then name a missing blob: the sweep (a) marks a blob pending in a
transaction that holds answer writers off (`hold_answer_writers`) and sees no row naming
it, then (b) deletes it and replaces the pending mark by a released one, under a new id,
in a transaction that holds writers off too; a row's transaction runs wholly before or
after each (its INSERT waits for a holder, a holder for the INSERT's transaction).
- Committed before (a): (a) sees the row and leaves the blob alone.
- After (a), before (b) commits: it sees the pending mark (the delete may yet come, or a
  killed (b) may have made it) and writes nothing.
- After (b): the released mark's id is above every id there was before (b) committed, so
  the row is written only if the keeper took its mark after (b), hence looked for and
  stored the blob after the delete.
A keeper whose mark is older than MARK_FRESH_S starts again too: released marks are
pruned a day after the delete (answer_release.py MARKS_KEPT_S).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Iterator

from sqlalchemy import Connection, func, or_, select

from media_crawler.store import schema
from media_crawler.store.ledger import Ledger
from media_crawler.store.time_pages import rows_by_time

A = schema.api_answers
R = schema.answer_releases
# How long a keeper's release mark serves it (store then record); far below how long the
# sweep keeps released marks (answer_release.py MARKS_KEPT_S), so none it needs is pruned.
MARK_FRESH_S = 3600.0


@dataclass(frozen=True)
class KeptAnswer:
    platform: str
    url: str
    fetched_at: float
    status: int
    reason: str
    headers: tuple[tuple[str, str], ...]
    sha256: str
    size: int
    id: int = 0  # the row's, once recorded (0: not yet)


@dataclass(frozen=True)
class FirstCapture:
    """Where and when an answer's bytes were first kept: what a revisit refers to."""
    id: int
    url: str
    fetched_at: float


@dataclass(frozen=True)
class ReleaseMark:
    """The newest release mark's id when a keeper began storing a blob (0: none yet)."""
    newest: int
    taken_at: float = field(default_factory=time.monotonic)

    def stale(self) -> bool:
        return time.monotonic() - self.taken_at > MARK_FRESH_S


def release_mark(ledger: Ledger) -> ReleaseMark:
    """Taken before the keeper stores a blob: the module docstring, step 1."""
    with ledger.engine.connect() as conn:
        return ReleaseMark(conn.execute(select(func.coalesce(func.max(R.c.id), 0))).scalar_one())


def record_answer(ledger: Ledger, answer: KeptAnswer, *, stored_since: ReleaseMark) -> bool:
    """Write the row of an answer whose blob the keeper stored after taking `stored_since`,
    unless the sweep is releasing that blob or released it since: then write nothing and
    return False (the keeper stores it again). The transaction reads and writes the ledger
    only: the module docstring, step 2."""
    with ledger.engine.connect() as conn, conn.begin() as transaction:
        conn.execute(A.insert().values(
            platform=answer.platform, url=answer.url, fetched_at=answer.fetched_at, status=answer.status,
            reason=answer.reason, headers=json.dumps([list(pair) for pair in answer.headers], ensure_ascii=False),
            sha256=answer.sha256, size=answer.size))
        released = conn.execute(select(R.c.id).where(
            R.c.sha256 == answer.sha256, or_(R.c.pending == 1, R.c.id > stored_since.newest)).limit(1)).first()
        if released is not None or stored_since.stale():
            transaction.rollback()
            return False
    return True


def hold_answer_writers(conn: Connection) -> None:
    """Until `conn`'s transaction ends, no answer row is written (the module docstring): the
    sweep's transactions take it before they read which blobs no row names.
    SQLite: the transaction is a write transaction (BEGIN IMMEDIATE, store/database.py)
    already. PostgreSQL: SHARE ROW EXCLUSIVE conflicts with an INSERT's ROW EXCLUSIVE and
    with itself, not with readers (an export reads on)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f'LOCK TABLE "{A.name}" IN SHARE ROW EXCLUSIVE MODE')


def kept_answers(ledger: Ledger, *, since: float | None = None, until: float | None = None,
                 platform: str | None = None) -> Iterator[KeptAnswer]:
    """The kept answers fetched in [since, until) (of `platform`), oldest first, streamed a
    page per transaction (as reports/reads.py `committed_rows`, and for the same reason)."""
    for row in rows_by_time(ledger.engine, A, A.c.fetched_at, since=since, until=until, platform=platform):
        yield KeptAnswer(platform=row.platform, url=row.url, fetched_at=row.fetched_at, status=row.status,
                         reason=row.reason, headers=tuple((str(n), str(v)) for n, v in json.loads(row.headers)),
                         sha256=row.sha256, size=row.size, id=row.id)


def first_answer_of(ledger: Ledger, sha256: str) -> FirstCapture | None:
    """The kept answer that first held these bytes (by fetch time, then id): an archive's
    original capture of them, every later one a revisit (as reports/reads.py
    `first_commit_of` for media). After `compact --answers-older-than`, the first one kept."""
    # Read by the sha256 index and picked in Python, for first_commit_of's reason: with an
    # ORDER BY fetched_at SQLite may walk the fetched_at index instead.
    query = select(A.c.id, A.c.url, A.c.fetched_at).where(A.c.sha256 == sha256)
    with ledger.engine.connect() as conn:
        first = min(conn.execute(query), key=lambda row: (row.fetched_at, row.id), default=None)
    return None if first is None else FirstCapture(first.id, first.url, first.fetched_at)


"""The ledger's rows of the API answers kept as fetched (mc_api_answers, schema version 8).

A row names its answer's body by sha256 (a blob of the answer store,
store/open_store.py `open_answer_store`) and holds what is not the body: the
platform, the scrubbed URL, when it was fetched, the status line and the headers
(scrubbed by pipeline/answers.py before they get here).

A blob may be released (store/answer_release.py) once no row names it, so recording a
row and deleting an unnamed blob are kept apart by one lock: the row's transaction (a
SQLite write transaction; on PostgreSQL the INSERT's ROW EXCLUSIVE lock) and the
release's (`hold_answer_writers`) exclude each other. A row's transaction checks its blob
is still stored after its INSERT: either the release saw the row and kept the blob, or
it released the blob before the row was written and the recorder stores it again.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable, Iterator

from sqlalchemy import Connection, select

from media_crawler.store import schema
from media_crawler.store.ledger import Ledger
from media_crawler.store.time_pages import rows_by_time

A = schema.api_answers


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


def record_answer(ledger: Ledger, answer: KeptAnswer, still_stored: Callable[[], None] = lambda: None) -> None:
    """Write the row; still_stored: make sure its blob is stored (called after the INSERT,
    inside its transaction: the module docstring). Raising in it writes no row."""
    with ledger.engine.begin() as conn:
        conn.execute(A.insert().values(
            platform=answer.platform, url=answer.url, fetched_at=answer.fetched_at, status=answer.status,
            reason=answer.reason, headers=json.dumps([list(pair) for pair in answer.headers], ensure_ascii=False),
            sha256=answer.sha256, size=answer.size))
        still_stored()


def hold_answer_writers(conn: Connection) -> None:
    """Until `conn`'s transaction ends, no answer row is written (the module docstring).
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


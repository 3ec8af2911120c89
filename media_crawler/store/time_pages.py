"""Rows of a ledger table in time order, read a page per transaction (keyset paging).

Each page is a short transaction of its own, so a long reader (an export) holds no
transaction open: on SQLite every transaction takes the write lock, and a crawl writing
meanwhile would wait for the reader's end. Pages continue after the last (time, id) seen,
never by OFFSET, so a page costs the same however far the reader has come.
"""
from __future__ import annotations

from typing import Any, Iterator

from sqlalchemy import Column, Table, and_, or_, select
from sqlalchemy.engine import Engine

PAGE_ROWS = 1000


def rows_by_time(engine: Engine, table: Table, at: Column, *, since: float | None = None,
                 until: float | None = None, platform: str | None = None) -> Iterator[Any]:
    """The rows of `table` whose `at` is in [since, until) (and of `platform`), by (at, id).
    Rows with no `at` are not read: the query goes by `at`'s index alone."""
    query = select(table).where(at.is_not(None)).order_by(at, table.c.id).limit(PAGE_ROWS)
    if since is not None:
        query = query.where(at >= since)
    if until is not None:
        query = query.where(at < until)
    if platform:
        query = query.where(table.c.platform == platform)
    after: tuple[Any, int] | None = None
    while True:
        page = query if after is None else query.where(
            or_(at > after[0], and_(at == after[0], table.c.id > after[1])))
        with engine.connect() as conn:
            rows = conn.execute(page).all()
        yield from rows
        if len(rows) < PAGE_ROWS:
            return
        last = rows[-1]
        after = (getattr(last, at.name), last.id)

"""Read-only questions the reports and logs ask the ledger.

The re-request sensor and `rerun-failed` (unfinished partitions), `export`
(committed rows), `demo`'s summary (totals) and discovery's per-item log lines
(how a batch landed) read through these, so the ledger's columns are named in
store/ only.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from sqlalchemy import func, select, text

from media_crawler.store.ledger import COMMITTED, FAILED, GONE, RETRY_WAIT, DiscoveredRow, Ledger, T
from media_crawler.store.schema import UNFINISHED_PREDICATE
from media_crawler.store.time_pages import rows_by_time

# Named, not "not finished" (schema.UNFINISHED_PREDICATE): an IN list over the few
# unfinished states can use an index, where NOT IN reads every row of a million-row
# ledger on each sensor tick.

# PostgreSQL, for this one read: no bitmap (nor sequential) scan. On a ledger autovacuum
# has not reached yet the planner guesses 3 % of the rows unfinished and takes a bitmap
# scan of a state-led index (ix_mc_tasks_state_lease), which visits in the table every
# row version that index still holds: each move of a row through its states adds one,
# dead once the row moves on, until VACUUM removes it. At 137,590 rows that was 688,638
# versions in 36,175 table pages for 688 unfinished rows, 0.6-1.6 s on every sensor tick
# (bench/unfinished_query.py). A plain index scan marks the dead entries it meets (kill
# bits): it pays for each once, and the next ticks skip them. JIT off: a plan costed
# with a disabled node would otherwise be compiled, for longer than it runs.
# set_config(..., true): for this transaction only.
_NO_BITMAP_SCAN = ("SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true), "
                   "set_config('jit', 'off', true)")


def unfinished_partition_counts(ledger: Ledger) -> list[tuple[str, str, int]]:
    """(source_key, day, unfinished item count), oldest day first. The predicate is the
    partial index's own, literally (schema.py ix_mc_tasks_unfinished): SQLite answers from
    that index alone. PostgreSQL takes it on a fresh ledger; once the moves have bloated it
    (many pages, few live entries: dear to the planner) an index scan of a state-led index
    instead, which costs as little once its dead entries are marked."""
    with ledger.engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(_NO_BITMAP_SCAN)
        return [(row[0], row[1], row[2]) for row in conn.execute(unfinished_partition_query())]


def unfinished_partition_query():
    return (select(T.c.source_key, T.c.day, func.count()).where(text(UNFINISHED_PREDICATE))
            .group_by(T.c.day, T.c.source_key).order_by(T.c.day, T.c.source_key))


@dataclass(frozen=True)
class CommittedRow:
    platform: str
    item_id: str
    variant: str
    kind: str
    canonical_url: str
    sha256: str
    size: int | None
    group_key: str | None
    source_key: str
    day: str
    published_at: str | None
    committed_at: float | None
    meta: dict[str, Any]
    # For the archive (export --format wacz):
    id: int = 0
    media_url: str = ""  # "" once compacted, and for a row the crawler made (a mux)
    finished_at: float | None = None  # when its download finished (None: committed without one)
    media_response: dict[str, Any] | None = None  # what the completing response said (schema 7)


def committed_rows(ledger: Ledger, *, since: float | None = None, until: float | None = None,
                   platform: str | None = None) -> Iterator[CommittedRow]:
    """Committed rows in commit order (committed in [since, until), of `platform`), streamed
    a page at a time: each page is a short transaction of its own, so a long export holds
    no transaction open (on SQLite every transaction takes the write lock, and a crawl
    writing meanwhile would wait for the export's end)."""
    # By the committed_at index alone: with the state in the query SQLite would take the
    # state index and sort every committed row for each page. The few rows that left the
    # committed state after their commit (re-queued by reconcile) are dropped here.
    for row in rows_by_time(ledger.engine, T, T.c.committed_at, since=since, until=until, platform=platform):
        if row.state == COMMITTED:
            yield _committed(row)


def first_commit_of(ledger: Ledger, sha256: str) -> CommittedRow | None:
    """The committed row that first holds these bytes (by commit time, then id): an
    archive's original capture of them, every later one a revisit."""
    # The rows of one sha256 are few: read them all by the sha256 index, pick in Python.
    # With the state (or an ORDER BY committed_at) in the query, SQLite walked the state
    # or committed_at index instead, every committed row for each item: an export of
    # 10,000 items took 25 times the CPU of 1,000 (bench/export_wacz.py).
    query = select(T).where(T.c.sha256 == sha256)
    with ledger.engine.connect() as conn:
        rows = [row for row in conn.execute(query) if row.state == COMMITTED]
    first = min(rows, key=lambda row: (row.committed_at or 0.0, row.id), default=None)
    return _committed(first) if first is not None else None


def _committed(row: Any) -> CommittedRow:
    return CommittedRow(
        platform=row.platform, item_id=row.item_id, variant=row.variant, kind=row.kind,
        canonical_url=row.canonical_url, sha256=row.sha256, size=row.size, group_key=row.group_key,
        source_key=row.source_key, day=row.day, published_at=row.published_at,
        committed_at=row.committed_at, meta=json.loads(row.meta or "{}"), id=row.id, media_url=row.media_url or "",
        finished_at=row.finished_at, media_response=json.loads(row.media_response) if row.media_response else None)


def totals_by_platform_kind_state(ledger: Ledger) -> list[tuple[str, str, str, int, int | None]]:
    """(platform, kind, state, rows, bytes) over the whole ledger."""
    query = (select(T.c.platform, T.c.kind, T.c.state, func.count(), func.sum(T.c.size))
             .group_by(T.c.platform, T.c.kind, T.c.state))
    with ledger.engine.connect() as conn:
        return [tuple(row) for row in conn.execute(query)]


def failure_counts_by_class(ledger: Ledger) -> list[tuple[str | None, int]]:
    """(error class, rows) of the rows that failed, are gone or wait for a retry."""
    query = (select(T.c.error_class, func.count()).where(T.c.state.in_([FAILED, GONE, RETRY_WAIT]))
             .group_by(T.c.error_class))
    with ledger.engine.connect() as conn:
        return [tuple(row) for row in conn.execute(query)]


def rows_by_identity(ledger: Ledger, platform: str, item_ids: Iterable[str]) -> dict[tuple[str, str], DiscoveredRow]:
    """(item_id, variant) -> the row, for the platform's rows of these items (every variant):
    discovery's fetch lines read here the rows a concurrent run inserted before its batch."""
    query = select(T.c.id, T.c.item_id, T.c.variant, T.c.state, T.c.attempts, T.c.discovered_at, T.c.queued_at).where(
        T.c.platform == platform, T.c.item_id.in_(set(item_ids)))
    with ledger.engine.connect() as conn:
        return {(row.item_id, row.variant): DiscoveredRow(row.id, row.state, row.attempts, row.discovered_at,
                                                          row.queued_at)
                for row in conn.execute(query)}

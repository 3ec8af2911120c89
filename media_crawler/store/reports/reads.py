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

from media_crawler.store.ledger import COMMITTED, FAILED, GONE, RETRY_WAIT, Ledger, T
from media_crawler.store.schema import UNFINISHED_PREDICATE

# Named, not "not finished" (schema.UNFINISHED_PREDICATE): an IN list over the few
# unfinished states can use an index, where NOT IN reads every row of a million-row
# ledger on each sensor tick.


def unfinished_partition_counts(ledger: Ledger) -> list[tuple[str, str, int]]:
    """(source_key, day, unfinished item count), oldest day first. The predicate is the
    partial index's own, literally (schema.py ix_mc_tasks_unfinished), so the planner
    reads only the unfinished rows, in the index's order, however bloated the ledger."""
    with ledger.engine.connect() as conn:
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


def committed_rows(ledger: Ledger, *, since: float | None = None, platform: str | None = None) -> Iterator[CommittedRow]:
    """Committed rows in commit order (committed at or after `since`, of `platform`), streamed."""
    query = select(T).where(T.c.state == COMMITTED).order_by(T.c.committed_at, T.c.id)
    if since is not None:
        query = query.where(T.c.committed_at >= since)
    if platform:
        query = query.where(T.c.platform == platform)
    with ledger.engine.connect() as conn:
        for row in conn.execute(query):
            yield CommittedRow(
                platform=row.platform, item_id=row.item_id, variant=row.variant, kind=row.kind,
                canonical_url=row.canonical_url, sha256=row.sha256, size=row.size, group_key=row.group_key,
                source_key=row.source_key, day=row.day, published_at=row.published_at,
                committed_at=row.committed_at, meta=json.loads(row.meta or "{}"))


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


@dataclass(frozen=True)
class DiscoveredRow:
    id: int
    state: str
    attempts: int
    discovered_at: float | None
    queued_at: float | None


def rows_by_identity(ledger: Ledger, platform: str, item_ids: Iterable[str]) -> dict[tuple[str, str], DiscoveredRow]:
    """(item_id, variant) -> the row, for the platform's rows of these items (every variant)."""
    query = select(T.c.id, T.c.item_id, T.c.variant, T.c.state, T.c.attempts, T.c.discovered_at, T.c.queued_at).where(
        T.c.platform == platform, T.c.item_id.in_(set(item_ids)))
    with ledger.engine.connect() as conn:
        return {(row.item_id, row.variant): DiscoveredRow(row.id, row.state, row.attempts, row.discovered_at,
                                                          row.queued_at)
                for row in conn.execute(query)}

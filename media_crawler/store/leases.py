"""The ledger's stage leases: who holds which rows, taking them, and giving them back.

Every lease's SQL is here: the download stage's claim (`claim_downloads`), the
verify and commit stages' (`claim_in_state`), every owner's renewal (`renew_leases`),
and the release of leases whose holder died. Which holder is dead is not the store's
to judge (pipeline/leases.py asks the process table): these functions only read
the leases and apply what the caller decided.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterable

from sqlalchemy import and_, func, or_, select, update

from media_crawler.store.database import lock_rows_in_id_order
from media_crawler.models import Lease
from media_crawler.store.ledger import (
    CLAIM_LIMIT, DISCOVERED, DOWNLOADING, RETRY_WAIT, SQLITE_NO_ABORT, TASK_COLUMNS, Ledger, SourceScope, T, Task,
    task_from_row, where_sources)

_CHUNK = 500  # ids per IN (...) list: far below SQLite's variable limit
# A verify or commit lease's length; its holder's keeper (pipeline/leases.py) renews it a third of the way in.
STAGE_LEASE_S = 300.0


def latest_expiry_by_owner(ledger: Ledger) -> dict[str, float]:
    """lease owner -> the latest expiry among the rows it holds (0.0 for none recorded).

    One row per owner, from the partial lease index: not every leased row into Python."""
    query = (select(T.c.lease_owner, func.max(T.c.lease_expires_at)).where(T.c.lease_owner.is_not(None))
             .group_by(T.c.lease_owner))
    with ledger.engine.connect() as conn:
        return {owner: expires or 0.0 for owner, expires in conn.execute(query)}


@dataclass
class ReleasedLeases:
    requeued: int = 0  # downloading rows handed back to the download stage
    unleased: int = 0  # rows of other states whose lease was dropped


def release_leases_of(ledger: Ledger, owners: Iterable[str]) -> ReleasedLeases:
    """Give back every row `owners` hold, in one transaction: downloading -> discovered
    (the .part stays, resumable with the validator the row recorded); other states keep
    their state and lose the lease."""
    released = ReleasedLeases()
    stamp = time.time()
    with ledger.engine.begin() as conn:
        for owner in owners:
            held = T.c.lease_owner == owner
            lock_rows_in_id_order(conn, T, held)  # PostgreSQL: one lock order with every other writer
            released.requeued += conn.execute(update(T).where(held, T.c.state == DOWNLOADING).values(
                state=DISCOVERED, lease_owner=None, lease_expires_at=None, updated_at=stamp)).rowcount
            released.unleased += conn.execute(update(T).where(held).values(
                lease_owner=None, lease_expires_at=None, updated_at=stamp)).rowcount
    return released


def drop_leases_of(ledger: Ledger, owner: str) -> None:
    """End every lease `owner` holds, rows left in their state (a stage on its way out
    hands back what it did not move on, so a re-run takes it at once)."""
    with ledger.engine.begin() as conn:
        lock_rows_in_id_order(conn, T, T.c.lease_owner == owner)
        conn.execute(update(T).where(T.c.lease_owner == owner).values(lease_owner=None, lease_expires_at=None))


def claim_downloads(
    ledger: Ledger, *, source_key: SourceScope, day: str | None, lease: Lease, limit: int | None = None,
    ignore_backoff: bool = False,
    shard: tuple[int, int] | None = None, claimed_before: float | None = None,
) -> list[Task]:
    """Lease claimable rows to `lease.owner`. Rows leased by a worker whose lease
    expired are claimable again: that worker is presumed dead.

    shard: (index, count): only rows whose id is index modulo count, so
    `count` processes can split one list without racing for the same rows.
    claimed_before: only rows not claimed since then (a step claiming in batches
    does not take back a row it already tried).
    """
    now = time.time()
    ready = [T.c.state == DISCOVERED,
             and_(T.c.state == RETRY_WAIT, or_(T.c.next_attempt_at.is_(None), T.c.next_attempt_at <= now))
             if not ignore_backoff else T.c.state == RETRY_WAIT]
    ready.append(and_(T.c.state == DOWNLOADING, T.c.lease_expires_at < now))
    query = where_sources(select(*TASK_COLUMNS).where(or_(*ready)), source_key)
    if day is not None:
        query = query.where(T.c.day == day)
    if shard is not None:
        index, count = shard
        query = query.where(T.c.id % count == index)
    if claimed_before is not None:
        query = query.where(or_(T.c.claimed_at.is_(None), T.c.claimed_at < claimed_before))
    query = query.order_by(T.c.id).limit(limit or CLAIM_LIMIT)
    if ledger.engine.dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True)
    with ledger.engine.begin() as conn:
        rows = conn.execute(query).fetchall()
        if not rows:
            return []
        ids = [row[0] for row in rows]  # TASK_COLUMNS begin with the id
        # One statement for the batch, without a statement journal on SQLite (ledger.SQLITE_NO_ABORT).
        conn.execute(update(T).prefix_with(SQLITE_NO_ABORT, dialect="sqlite").where(T.c.id.in_(ids)).values(
            state=DOWNLOADING, lease_owner=lease.owner, lease_expires_at=now + lease.seconds, claimed_at=now,
            run_id=lease.run_id, updated_at=now,
        ))
    return [task_from_row(row) for row in rows]

def renew_leases(ledger: Ledger, owner: str, lease_s: float) -> int:
    """Extend every lease `owner` holds (whatever stage holds the rows)."""
    now = time.time()
    with ledger.engine.begin() as conn:
        lock_rows_in_id_order(conn, T, T.c.lease_owner == owner)
        return conn.execute(update(T).where(T.c.lease_owner == owner).values(
            lease_expires_at=now + lease_s)).rowcount


def claim_in_state(ledger: Ledger, state: str, *, source_key: SourceScope, day: str | None, owner: str,
                   lease_s: float = STAGE_LEASE_S) -> list[Task]:
    """Lease the partition's rows in `state` that nobody holds, or whose lease expired."""
    now = time.time()
    free = or_(T.c.lease_owner.is_(None), T.c.lease_expires_at < now)
    query = where_sources(select(T.c.id).where(T.c.state == state, free), source_key)
    if day is not None:
        query = query.where(T.c.day == day)
    if ledger.engine.dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True)
    with ledger.engine.begin() as conn:  # SQLite: BEGIN IMMEDIATE, so the look and the lease are one step
        ids = [row[0] for row in conn.execute(query.order_by(T.c.id))]
        for start in range(0, len(ids), _CHUNK):
            conn.execute(update(T).where(T.c.id.in_(ids[start:start + _CHUNK]), T.c.state == state, free).values(
                lease_owner=owner, lease_expires_at=now + lease_s, updated_at=now))
    if not ids:
        return []
    claimed = set(ids)
    return [task for task in ledger.tasks(source_key=source_key, day=day, states=[state]) if task.id in claimed]

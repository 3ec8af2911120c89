"""Leases for the verify and commit stages, and leases held by workers that died.

The download stage leases the rows it works on (pipeline/download.py). Verify
and commit lease theirs too: two runs of one partition at once (a retry while
the old run still lives, the sensor and an operator) then never verify or
commit the same row twice, and a row's transition is applied only by the
holder of its lease.

A lease is given back when its holder is known to be dead: its process token
(recovery/liveness.py) names a process on this host that no longer exists,
or the lease expired (a holder elsewhere stopped renewing). A restarted crawl
calls `release_dead_leases` before claiming, so it resumes at once instead of
waiting out the expiry of its dead predecessor's leases.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from sqlalchemy import func, or_, select, update

from media_crawler.recovery.liveness import is_dead, token_of_owner
from media_crawler.store.database import lock_rows_in_id_order
from media_crawler.store.ledger import DISCOVERED, DOWNLOADING, Ledger, SourceScope, T, Task, where_sources

STAGE_LEASE_S = 300.0
_CHUNK = 500  # ids per IN (...) list: far below SQLite's variable limit


@dataclass
class LeaseRelease:
    requeued: int = 0  # downloading rows handed back to the download stage
    unleased: int = 0  # downloaded/verified rows whose stage lease was dropped
    dead_owners: list[str] = field(default_factory=list)


def dead_owners(ledger: Ledger, *, uncertain: bool = False, now: float | None = None) -> list[str]:
    """Lease owners whose process is gone or whose lease expired. uncertain=True
    treats every holder as gone (a restored backup: none of them runs here)."""
    now = time.time() if now is None else now
    # One row per owner, from the partial lease index: not every leased row into Python.
    query = (select(T.c.lease_owner, func.max(T.c.lease_expires_at)).where(T.c.lease_owner.is_not(None))
             .group_by(T.c.lease_owner))
    with ledger.engine.connect() as conn:
        latest = {owner: expires or 0.0 for owner, expires in conn.execute(query)}
    return [owner for owner, expires in latest.items()
            if uncertain or expires < now or is_dead(token_of_owner(owner)) is True]


def release_dead_leases(ledger: Ledger, *, uncertain: bool = False, now: float | None = None) -> LeaseRelease:
    """Give back rows leased by dead owners: downloading -> discovered (the .part
    stays, resumable with the validator the row recorded); other states keep
    their state and lose the lease."""
    release = LeaseRelease(dead_owners=dead_owners(ledger, uncertain=uncertain, now=now))
    stamp = time.time()
    with ledger.engine.begin() as conn:
        for owner in release.dead_owners:
            held = T.c.lease_owner == owner
            lock_rows_in_id_order(conn, T, held)  # PostgreSQL: one lock order with every other writer
            release.requeued += conn.execute(update(T).where(held, T.c.state == DOWNLOADING).values(
                state=DISCOVERED, lease_owner=None, lease_expires_at=None, updated_at=stamp)).rowcount
            release.unleased += conn.execute(update(T).where(held).values(
                lease_owner=None, lease_expires_at=None, updated_at=stamp)).rowcount
    return release


def claim_in_state(ledger: Ledger, state: str, *, source_key: SourceScope, day: str | None, owner: str,
                   lease_s: float = STAGE_LEASE_S) -> list[Task]:
    """Lease the partition's rows in `state` that nobody (alive) holds."""
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


def release_values() -> dict:
    """Ledger values that end a stage lease (merge into the row's transition)."""
    return {"lease_owner": None, "lease_expires_at": None}


class LeaseHeartbeat:
    """Renews every lease `owner` holds while a stage runs; a dead process stops
    renewing, and its leases expire so another worker can take the rows."""

    def __init__(self, ledger: Ledger, owner: str, lease_s: float = STAGE_LEASE_S) -> None:
        self.ledger, self.owner, self.lease_s = ledger, owner, lease_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="mc-lease-heartbeat", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _beat(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            try:
                self.ledger.heartbeat(self.owner, self.lease_s)
            except Exception:  # a DB hiccup must not kill the stage; the next beat retries
                pass


class LeaseKeeper(LeaseHeartbeat):
    """A LeaseHeartbeat that, on the way out, normal or not, hands back the rows
    the stage did not move on, so a re-run can take them at once instead of
    waiting for the expiry."""

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        with self.ledger.engine.begin() as conn:
            lock_rows_in_id_order(conn, T, T.c.lease_owner == self.owner)
            conn.execute(update(T).where(T.c.lease_owner == self.owner).values(lease_owner=None, lease_expires_at=None))

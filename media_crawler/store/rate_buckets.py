"""The rows of `mc_rate_budget`: each platform's shared token bucket, as stored.

The bucket's arithmetic (refill, take, penalty) is download/ratebudget.py's;
this module only reads and writes the row, under the row's lock, so every
process on one ledger database sees one bucket per platform.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Iterator, NamedTuple, Protocol

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from media_crawler.store.schema import rate_budget


# A penalty never takes a platform below this share of its configured rate, so
# repeated 429s slow it down hard but never stop it for good.
MIN_RATE_FRACTION = 1 / 64
TOKEN_EPSILON = 1e-6


@dataclass(frozen=True)
class Bucket:
    """A platform's token bucket as its row stores it, and its arithmetic: the budget
    (download/ratebudget.py) draws on it, `status` reads it (store/reports/platform_signals.py)."""

    tokens: float
    updated_at: float
    rate: float  # tokens per second in force now
    base_rate: float  # the configured rate, restored when a penalty ends
    burst: float
    slow_until: float = 0.0

    def refilled(self, now: float) -> "Bucket":
        """The bucket at `now`: tokens earned since updated_at, penalty lifted once it ran out."""
        tokens, rate, slow_until, since = self.tokens, self.rate, self.slow_until, self.updated_at
        if slow_until and now >= slow_until:
            tokens += max(slow_until - since, 0.0) * rate  # earned at the lowered rate
            rate, since, slow_until = self.base_rate, max(since, slow_until), 0.0
        tokens = min(self.burst, tokens + max(now - since, 0.0) * rate)
        return replace(self, tokens=tokens, updated_at=max(now, self.updated_at), rate=rate, slow_until=slow_until)

    def take(self, now: float, wanted: int) -> tuple["Bucket", int, float]:
        """(new bucket, tokens granted, seconds until one token if none granted)."""
        bucket = self.refilled(now)
        # The epsilon absorbs float error (0.2 s * 5/s == 0.9999...): without it
        # the bucket would ask for ever-tinier sleeps that never add up to a token.
        granted = min(wanted, int(bucket.tokens + TOKEN_EPSILON))
        if granted >= 1:
            return replace(bucket, tokens=bucket.tokens - granted), granted, 0.0
        return bucket, 0, (1.0 - bucket.tokens) / bucket.rate

    def penalized(self, now: float, factor: float, seconds: float) -> "Bucket":
        bucket = self.refilled(now)
        rate = max(bucket.rate * factor, bucket.base_rate * MIN_RATE_FRACTION)
        # The platform just said "too many": spend nothing that was saved up.
        return replace(bucket, tokens=min(bucket.tokens, 0.0), rate=rate, slow_until=max(bucket.slow_until, now + seconds))



class StoredBucket(NamedTuple):
    """A bucket row's values, in the order download/ratebudget.py's Bucket takes them."""

    tokens: float
    updated_at: float
    rate: float
    base_rate: float
    burst: float
    slow_until: float


class BucketState(Protocol):
    """What `LockedBucket.save` writes back (download/ratebudget.py's Bucket is one)."""

    tokens: float
    updated_at: float
    rate: float
    slow_until: float


class LockedBucket:
    """One platform's row, locked until the transaction that read it ends."""

    def __init__(self, conn: Connection, platform: str) -> None:
        self._conn, self._platform = conn, platform
        self._row = rate_budget.c.platform == platform
        if conn.dialect.name == "sqlite":
            # An UPDATE opens the write transaction at once: a plain SELECT first would
            # take a shared lock and could deadlock on the upgrade to a write lock.
            conn.execute(update(rate_budget).where(self._row).values(platform=rate_budget.c.platform))
            query = select(rate_budget).where(self._row)
        else:
            query = select(rate_budget).where(self._row).with_for_update()
        row = conn.execute(query).one()
        self.stored = StoredBucket(row.tokens, row.updated_at, row.rate, row.base_rate, row.burst,
                                   row.slow_until or 0.0)

    def save(self, bucket: BucketState) -> None:
        """Write back the bucket after a refill, a take or a penalty."""
        self._conn.execute(update(rate_budget).where(self._row).values(
            tokens=bucket.tokens, updated_at=bucket.updated_at, rate=bucket.rate, slow_until=bucket.slow_until))

    def adopt_limits(self, *, tokens: float, updated_at: float, rate: float, base_rate: float, burst: float) -> None:
        """Write a newly configured rate and burst (a penalty in force keeps its slow_until)."""
        self._conn.execute(update(rate_budget).where(self._row).values(
            tokens=tokens, updated_at=updated_at, base_rate=base_rate, burst=burst, rate=rate))


@contextmanager
def locked_bucket(engine: Engine, platform: str) -> Iterator[LockedBucket]:
    """One short transaction holding the platform's row lock: read, decide, save.
    Callers wait for tokens after it ended, never inside it."""
    with engine.begin() as conn:
        yield LockedBucket(conn, platform)


def create_bucket(engine: Engine, platform: str, *, rate: float, burst: float, now: float) -> bool:
    """Insert a full bucket for `platform`; False when the row is there already
    (another process, or an earlier run, made it)."""
    try:
        with engine.begin() as conn:
            conn.execute(insert(rate_budget).values(
                platform=platform, tokens=burst, updated_at=now, rate=rate, base_rate=rate, burst=burst,
                slow_until=0.0, in_flight=0))
        return True
    except IntegrityError:
        return False

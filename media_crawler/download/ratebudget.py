"""Per-platform request budgets: a token bucket for the rate, a semaphore for concurrency.

`SharedRateBudget` keeps each platform's bucket in the ledger table
`mc_rate_budget`, so every worker of every process and run on one ledger
draws from one budget: four processes share a platform's 4 requests/s rather
than taking 4 each. `InMemoryRateBudget` is the same bucket for one process
(tests, `fetch-urls` without a database).

Platforms without a configured limit are not throttled. The concurrency cap
is per process (a semaphore): a cross-process in-flight counter in the
database would leak slots whenever a worker dies mid-request.
Clocks are wall time (time.time): bucket timestamps are compared across processes.
"""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Callable, ContextManager, Mapping

from media_crawler.store.rate_buckets import Bucket, create_bucket, locked_bucket

# The slot of a platform without a concurrency cap: one shared, stateless context (entered
# by every request of such a platform, from any thread).
_NO_CAP = contextlib.nullcontext()


class _ConcurrencyCaps:
    def __init__(self, concurrency: Mapping[str, int] | None) -> None:
        self._semaphores = {p: threading.BoundedSemaphore(n) for p, n in (concurrency or {}).items() if n > 0}

    def slot(self, platform: str) -> ContextManager[None]:
        semaphore = self._semaphores.get(platform)
        return semaphore if semaphore is not None else _NO_CAP


class InMemoryRateBudget:
    """A token bucket per platform for one process."""

    def __init__(
        self,
        limits: Mapping[str, tuple[float, float]],
        *,
        concurrency: Mapping[str, int] | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        now = clock()
        self._buckets = {p: Bucket(burst, now, rate, rate, burst) for p, (rate, burst) in _checked(limits).items()}
        self._lock = threading.Lock()
        self._caps = _ConcurrencyCaps(concurrency)
        self._clock, self._sleep = clock, sleep

    def acquire(self, platform: str) -> None:
        while platform in self._buckets:
            with self._lock:
                bucket, granted, wait = self._buckets[platform].take(self._clock(), 1)
                self._buckets[platform] = bucket
            if granted:
                return
            self._sleep(wait)  # outside the lock: other platforms keep going

    def penalize(self, platform: str, factor: float = 0.5, seconds: float = 60.0) -> None:
        with self._lock:
            if platform in self._buckets:
                self._buckets[platform] = self._buckets[platform].penalized(self._clock(), factor, seconds)

    def slot(self, platform: str) -> ContextManager[None]:
        return self._caps.slot(platform)

    def current_rate(self, platform: str) -> float | None:
        with self._lock:
            bucket = self._buckets.get(platform)
            return None if bucket is None else bucket.refilled(self._clock()).rate


class SharedRateBudget:
    """Token buckets in `mc_rate_budget`, shared by every process using the ledger database.

    Each refill-and-take is one short transaction holding the platform's row
    lock: on PostgreSQL `SELECT ... FOR UPDATE`; on SQLite an UPDATE opens the
    transaction, which takes the database write lock at once (a plain SELECT
    first would take a shared lock and could deadlock on the upgrade). Waiting
    for tokens happens after commit, never inside the transaction.

    Batching: a process takes up to `max_batch` tokens per transaction (only
    what the bucket holds, and at most ~`batch_window_s` worth of the rate)
    and hands them to its threads from memory. At hundreds of requests per
    second, one write transaction per request would make the database the
    bottleneck; stashed tokens expire after `stash_ttl_s` so a process that
    went quiet cannot spend an old burst later.
    """

    def __init__(
        self,
        engine,  # the ledger's (Ledger.engine)
        limits: Mapping[str, tuple[float, float]],
        *,
        concurrency: Mapping[str, int] | None = None,
        max_batch: int = 16,
        batch_window_s: float = 0.05,
        stash_ttl_s: float = 1.0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._engine = engine
        self._limits = _checked(limits)
        self._caps = _ConcurrencyCaps(concurrency)
        self._max_batch, self._batch_window_s, self._stash_ttl_s = max_batch, batch_window_s, stash_ttl_s
        self._clock, self._sleep = clock, sleep
        self._stash: dict[str, tuple[int, float]] = {}  # platform -> (tokens, taken_at)
        self._stash_lock = threading.Lock()
        self._ensure_rows()

    def acquire(self, platform: str) -> None:
        if platform not in self._limits:
            return
        while True:
            if self._take_from_stash(platform):
                return
            granted, wait = self._take_from_database(platform)
            if granted:
                if granted > 1:
                    with self._stash_lock:
                        stashed, _ = self._stash.get(platform, (0, 0.0))
                        self._stash[platform] = (stashed + granted - 1, self._clock())
                return
            self._sleep(wait)

    def penalize(self, platform: str, factor: float = 0.5, seconds: float = 60.0) -> None:
        if platform not in self._limits:
            return
        with self._stash_lock:
            self._stash.pop(platform, None)  # stashed tokens were earned at the old rate
        with locked_bucket(self._engine, platform) as row:
            row.save(Bucket(*row.stored).penalized(self._clock(), factor, seconds))

    def slot(self, platform: str) -> ContextManager[None]:
        return self._caps.slot(platform)

    def current_rate(self, platform: str) -> float | None:
        if platform not in self._limits:
            return None
        with locked_bucket(self._engine, platform) as row:
            return Bucket(*row.stored).refilled(self._clock()).rate

    def _take_from_stash(self, platform: str) -> bool:
        with self._stash_lock:
            count, taken_at = self._stash.get(platform, (0, 0.0))
            if count <= 0 or self._clock() - taken_at > self._stash_ttl_s:
                self._stash.pop(platform, None)
                return False
            self._stash[platform] = (count - 1, taken_at)
            return True

    def _take_from_database(self, platform: str) -> tuple[int, float]:
        with locked_bucket(self._engine, platform) as row:
            bucket = Bucket(*row.stored)
            wanted = max(1, min(self._max_batch, int(bucket.rate * self._batch_window_s)))
            bucket, granted, wait = bucket.take(self._clock(), wanted)
            row.save(bucket)
        return granted, wait

    def _ensure_rows(self) -> None:
        """Create missing platform rows; adopt the configured rate and burst for existing ones."""
        for platform, (rate, burst) in self._limits.items():
            now = self._clock()
            if create_bucket(self._engine, platform, rate=rate, burst=burst, now=now):
                continue
            with locked_bucket(self._engine, platform) as row:
                bucket = Bucket(*row.stored).refilled(now)
                slowed = bucket.slow_until > now
                row.adopt_limits(tokens=min(bucket.tokens, burst), updated_at=bucket.updated_at, base_rate=rate,
                                 burst=burst, rate=min(bucket.rate, rate) if slowed else rate)


def _checked(limits: Mapping[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    checked = {}
    for platform, (rate, burst) in limits.items():
        if rate <= 0 or burst < 1:
            raise ValueError(f"rate limit for {platform}: rate must be > 0 and burst >= 1, got {rate}, {burst}")
        checked[platform] = (float(rate), float(burst))
    return checked

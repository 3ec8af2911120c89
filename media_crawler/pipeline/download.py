"""Stage 2: lease the partition's pending items and stream them into staging.

Items are leased (owner + expiry, renewed by a heartbeat), so a second run of
the same partition, or a worker restarted after a crash, never downloads an
item another live worker holds; an expired lease means a dead worker and the
item is claimable again. Per-item retries happen here, driven by the error
taxonomy; what is still failing afterwards waits in `retry_wait` with a
growing delay. When a whole platform is failing (download/outage.py), the
stage stops handing its items out, so a platform answering 500 for an hour is
retried gently across runs instead of burning every retry in its first minute.
"""
from __future__ import annotations

import contextlib
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from media_crawler.download.fetcher import DownloadResult
from media_crawler.download.pool import Naps, run_bounded
from media_crawler.download.request import DownloadPolicy, DownloadRequest
from media_crawler.download.retry import AttemptReport, download_with_retries
from media_crawler import errors
from media_crawler.errors import CrawlError, ErrorClass, policy_for
from media_crawler.models import DayWindow, Lease
from media_crawler.observe.events import log_item, log_stages
from media_crawler.observe.progress import LogSink, Progress
from media_crawler.pipeline.report import BYTES_COMMITTED, StageReport
from media_crawler.pipeline.runtime import Runtime
from media_crawler.platforms.base import PlatformAdapter
from media_crawler.pipeline.scope import Sources, source_keys
from media_crawler.pipeline.scheduling import SizeAwareOrder
from media_crawler.crashpoints import AFTER_CLAIM, AFTER_DOWNLOAD_LEDGER, AFTER_PART_WRITE, crash_point
from media_crawler.pipeline.leases import LeaseHeartbeat, release_dead_leases
from media_crawler.pipeline.liveness import lease_owner
from media_crawler.download.outage import OutageBreaker
from media_crawler.store.staging import remove_committed_staging
from media_crawler.store.ledger import GONE, Task
from media_crawler.store.leases import claim_downloads
from media_crawler.store.transitions import (
    AlreadyCommitted, Downloaded, DownloadFailed, FailedAttempt, HandedBack, Then, Transition,
)

LEASE_S = 120.0
# Rows one claim of a download step leases (the step claims again when a batch is done).
CLAIM_BATCH = 512
# Delay before a later run retries an item that exhausted its in-step attempts.
CROSS_RUN_BACKOFF_CAP_S = 1800.0
# Ledger writes are batched (one transaction per batch, not per file), but never held
# longer than FLUSH_AFTER_S: a crash loses at most that much finished work's records.
FLUSH_EVERY = 100
FLUSH_AFTER_S = 0.5


@dataclass
class ItemOutcome:
    task: Task
    result: DownloadResult | None
    error: CrawlError | None
    attempts: int
    started_at: float
    duration_ms: float
    already_stored: bool = False
    validator: str | None = None  # resume validator of a partial .part, kept for the next run
    # What an `after_download` continuation did with the staged file (fetch-urls
    # verifies and commits in the worker): `.transition` follows the download in the
    # same ledger write, its `.lines` join the download's in the item's one line, and an
    # `.error` that stops admission halts the step (pipeline/settle.py `Settled`).
    follow_up: Any = None


@dataclass(frozen=True)
class Workers:
    """The threads a download step works with.

    count: items downloaded at once (None: the runtime's download_threads).
    wait_threads: threads beyond `count` for items waiting out a retry delay,
    each started only when an item falls asleep (download/pool.py `Naps`). At most `count` items are downloaded
    at once; an item sleeping through a backoff or a Retry-After gives its
    turn to the next one, so a server's pauses no longer hold back the rest of the list.
    after_download: run right after a successful download, with the item's
    outcome, on `count` threads of its own; its result becomes `follow_up` (the
    verify and commit stages pipelined per item, batched in the same ledger
    writes: fetch-urls). The downloads do not wait for it: they run ahead,
    as far as the claimed batch goes.
    """

    count: int | None = None
    wait_threads: int = 0
    after_download: Callable[[ItemOutcome], Any] | None = None


def download_partition(runtime: Runtime, sources: Sources, window: DayWindow | None,
                       run_id: str | None = None, workers: Workers = Workers(),
                       ignore_backoff: bool = False, progress_sinks: list | None = None,
                       shard: tuple[int, int] | None = None) -> StageReport:
    """Download every claimable item of the partition: of one source or a shard's
    sources (every day when window is None; every source when sources is None too).

    ignore_backoff: also take retry_wait items whose delay has not passed (a
    step retry that already waited for them).
    progress_sinks: where progress goes (observe/progress.py); default a
    periodic `progress` log event, which is what a Dagster run shows.
    shard: (index, count): claim only this process's share of the rows (see store/leases.claim_downloads)."""
    report = StageReport("download")
    # The owner names this process (host/pid/start), so a restart can tell at
    # once that a predecessor's leases are dead instead of waiting LEASE_S.
    owner = lease_owner(run_id)
    release_dead_leases(runtime.ledger)
    step_started = time.time()
    halted: dict[str, CrawlError] = {}
    breaker = OutageBreaker()
    count = workers.count or runtime.download_threads
    # The pool's worker threads run in a copy of this context (download/pool.py): the
    # step's correlation ids are in every item's line without each item setting them.
    turns = _Turns(count, Naps(workers.wait_threads)) if workers.wait_threads > 0 else None
    step = _BatchContext(owner, halted, breaker, count, turns, workers.wait_threads, workers.after_download)

    def claim() -> list[Task]:
        # In batches: only the rows in hand carry a lease, so a heartbeat rewrites a
        # batch, not the whole partition (at 6,400 items it rewrote every row every
        # 40 s: ~8 versions per item, bench/SCALE.md). Rows this step claimed before
        # (a failure it already recorded) are not taken again.
        batch = claim_downloads(
            runtime.ledger,
            source_key=source_keys(sources), day=window.day.isoformat() if window else None,
            lease=Lease(owner, LEASE_S, run_id), ignore_backoff=ignore_backoff, shard=shard,
            limit=CLAIM_BATCH, claimed_before=step_started)
        crash_point(AFTER_CLAIM)
        return batch

    tasks = claim()
    # A kill between the store's link and the unlink of the staging name leaves a .part
    # that is a second name of a committed blob: drop those before any download can write
    # into one (store/staging.py). After the claim: a row we now hold is linked by no one else.
    remove_committed_staging(runtime.store, runtime.ledger)
    sinks = progress_sinks if progress_sinks is not None else [LogSink(stage="download")]
    with LeaseHeartbeat(runtime.ledger, owner, LEASE_S), Progress("download", len(tasks), sinks=sinks) as progress:
        while tasks:
            report.extra["items_claimed"] = report.extra.get("items_claimed", 0) + len(tasks)
            progress.total = report.extra["items_claimed"]
            _download_batch(runtime, tasks, step, report, progress)
            tasks = claim() if len(tasks) >= CLAIM_BATCH else []
    report.extra.setdefault("items_claimed", 0)
    if halted:
        report.extra["platforms_halted"] = len(halted)
    return report


@dataclass
class _BatchContext:
    """What every batch of one download step shares, each platform's download policy included."""

    owner: str
    halted: dict
    breaker: OutageBreaker
    workers: int
    turns: Any
    wait_threads: int
    after_download: Callable[[ItemOutcome], Any] | None
    policies: dict[str, DownloadPolicy] = field(default_factory=dict)
    record_free_kinds: dict[type, bool] = field(default_factory=dict)  # record_free's answers by adapter class

    def policy(self, runtime: Runtime, platform: str) -> DownloadPolicy:
        """The platform's download policy, made on its first item and shared by the rest of the step."""
        policy = self.policies.get(platform)
        if policy is None:  # two workers may both make it: equal values, either one will do
            policy = self.policies[platform] = DownloadPolicy(
                max_bytes=runtime.config.max_item_bytes, url_policy=runtime.media_policy(platform),
                max_attempts=errors.ATTEMPTS.in_step, budget=runtime.budget_for(platform),
                # A worker sleeping through a retry delay gives its turn to the next item.
                sleep=self.turns.sleep if self.turns else time.sleep,
            )
        return policy

    def record_free(self, adapter: PlatformAdapter) -> bool:
        """Whether the adapter's per-item download hooks answer without the item's record, so
        that none is made (a MediaRecord per item) but for a re-resolution: it keeps
        PlatformAdapter's url_lifetime_for with URLs that never expire (no lifetime) and its
        download_headers (none), as the URL-list adapter does."""
        free = self.record_free_kinds.get(type(adapter))
        if free is None:
            kind = type(adapter)
            free = self.record_free_kinds[kind] = (
                kind.url_lifetime_for is PlatformAdapter.url_lifetime_for and adapter.url_lifetime_s is None
                and kind.download_headers is PlatformAdapter.download_headers)
        return free


def _download_batch(runtime: Runtime, tasks: list[Task], step: _BatchContext, report: StageReport,
                    progress: Progress) -> None:
    """Download one claimed batch with the step's worker threads, recording as it goes."""
    # Largest first, and never every worker on a large file while small ones wait (pipeline/scheduling.py).
    order = SizeAwareOrder(tasks, step.workers)

    ahead = _RunAhead(step.workers) if step.after_download is not None else None
    # Small bodies kept in memory for their verification (DownloadResult.body, up to 256 KiB
    # each) while they wait for their settle: at most twice the step's threads (review38: the
    # run-ahead let a claimed batch's worth pile up, ~260 per process). Past that a download
    # keeps no body and its verification reads the .part. Bounding the run-ahead itself
    # instead cost the f503 profile ~1 s of 4 (its last 503s met late again, issue 31).
    bodies = _HeldBodies(2 * (step.workers + max(step.wait_threads, 0))) if ahead is not None else None

    turns = step.turns or contextlib.nullcontext()

    def download(task: Task) -> ItemOutcome:
        settles = holds_body = False
        if ahead is not None and not ahead.take():
            raise _StepEnding("the step is ending: not downloaded")
        may_keep_body = bodies is None or bodies.take()
        try:
            with turns:
                item = _download_one(runtime, task, step, keep_body=may_keep_body)
            settles = ahead is not None and item.error is None and item.result is not None
            holds_body = settles and bodies is not None and item.result.body is not None
            return item
        finally:
            order.finished(task)
            if ahead is not None and not settles:
                ahead.give_back(committed=False)
            if bodies is not None and may_keep_body and not holds_body:
                bodies.give_back()  # no body waits for a settle: the share is free again

    def settle(item: ItemOutcome) -> ItemOutcome:
        if item.error is not None or item.result is None:
            return item  # nothing downloaded to settle (its credit went back with the download)
        committed = False
        try:
            item.follow_up = step.after_download(item)
            stopped = getattr(item.follow_up, "error", None)
            if stopped is not None and stopped.policy.stops_admission:
                # A full or failing disk under the commit: hand out no more downloads,
                # as the commit stage stops touching the store (pipeline/settle.py).
                step.halted.setdefault(item.task.platform, stopped)
            committed = stopped is None
            return item
        finally:
            ahead.give_back(committed=committed)
            if item.result.body is not None:
                bodies.give_back()

    # The continuation runs on threads of its own (as many as the workers), and the
    # downloads run ahead of it (_RunAhead says how far): so a server's 503 or 429 is
    # met, and its Retry-After waited out, while the items already in are still being
    # verified (CPU: every image fully decoded), instead of at the end of the list
    # (issue 31: with each download waiting for the verification before it, the
    # items fetched in the run's last second met their Retry-After there, and the
    # run ended a Retry-After after the CPU's work).
    then = settle if step.after_download is not None else None
    pending_changes: list = []
    pending_bytes = 0  # received by the items in pending_changes: progress advances with each flush
    last_flush = time.monotonic()
    outcomes = run_bounded(download, order, workers=step.workers, naps=step.turns.naps if step.turns else None,
                           then=then, then_workers=step.workers, closing=ahead.close if ahead is not None else None)
    try:
        for outcome in outcomes:
            if not outcome.ok:  # a bug, not a classified failure: record it as such and go on
                error = CrawlError(ErrorClass.STORAGE_ERROR, f"unexpected {type(outcome.error).__name__}: {outcome.error}")
                item = ItemOutcome(outcome.item, None, error, outcome.item.attempts + 1, time.time(), 0.0)
            else:
                item = outcome.result
            # Guarded by our lease: if it was taken over, the new holder's result wins.
            pending_changes.append((item.task.id, step.owner, _record(report, item, step.halted)))
            if item.result is not None:
                pending_bytes += item.result.bytes_received
            if len(pending_changes) >= FLUSH_EVERY or time.monotonic() - last_flush > FLUSH_AFTER_S:
                _apply(runtime, pending_changes)
                # Progress as the ledger has it, a batch at a time (its sinks show it every
                # 100 items or seconds anyway): a snapshot per item was work for nothing.
                progress.advance(len(pending_changes), bytes=pending_bytes)
                pending_changes.clear()
                pending_bytes = 0
                last_flush = time.monotonic()
                crash_point(AFTER_DOWNLOAD_LEDGER)
    finally:
        # Stopping early (a failed ledger write, Ctrl-C): run_bounded skips the settles not
        # started, and only a settle gives a download's credit back, so a download waiting
        # for one would wait for ever, and the pool's join with it. The pool closes the
        # credits (`closing` above) before that join, however it stops: here, or on an
        # exception raised inside it (Ctrl-C while it waits for an outcome), where a close
        # in this finally would come after the join (review38: the step hung).
        outcomes.close()
    _apply(runtime, pending_changes)
    if pending_changes:
        progress.advance(len(pending_changes), bytes=pending_bytes)
    crash_point(AFTER_DOWNLOAD_LEDGER)


def _apply(runtime: Runtime, changes: list) -> None:
    """Record a batch of outcomes. An `after_download` continuation that committed
    (fetch-urls, inside the store's deferred_sync) left its link to be made durable
    here: once for the batch, before any row says committed. Every item in `changes`
    was linked before its worker returned it, so this flush covers them all."""
    runtime.store.sync_deferred()
    runtime.ledger.apply(changes)


class _RunAhead:
    """How far downloads may run ahead of their items' verification and commit.

    Far enough that a server's Retry-After is waited out while earlier items are
    still being verified (issue 31), but only as far as the store has shown it
    takes what the downloads bring. Each download holds a credit until its item
    is settled (or ends without a settle); a step starts with one per worker (as
    many downloads as when each worker settled its own item before the next),
    and every commit adds one. So a store that refuses the first commits (a full
    disk, a failing bucket: they halt the step) sees no download start before the
    halt is known, as before; a store that takes them lets the downloads get as
    far ahead as the claimed batch (the memory that costs is `_HeldBodies`').
    Tokens in a SimpleQueue, as `_Turns`.

    `close` ends the step's waits: a download waiting for a credit that only a
    settle would give back, when the pool skips the settles not started (the
    consumer stopped: a failed ledger write, Ctrl-C), would otherwise wait, and
    the pool's join with it, forever.
    """

    def __init__(self, workers: int) -> None:
        self._credits: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(workers):
            self._credits.put(None)
        self._closed = False

    def take(self) -> bool:
        """Wait for a credit; False once the step is closing (download nothing more)."""
        self._credits.get()
        if self._closed:
            self._credits.put(None)  # passed on: every download still waiting wakes and stops
            return False
        return True

    def give_back(self, *, committed: bool) -> None:
        self._credits.put(None)
        if committed:
            self._credits.put(None)

    def close(self) -> None:
        self._closed = True
        self._credits.put(None)


class _HeldBodies:
    """How many downloaded small bodies may wait in memory for their settle (`limit`)."""

    def __init__(self, limit: int) -> None:
        self._free = limit
        self._lock = threading.Lock()

    def take(self) -> bool:
        """A share for one more body, if one is free (never waits: without one, no body is kept)."""
        with self._lock:
            if self._free <= 0:
                return False
            self._free -= 1
            return True

    def give_back(self) -> None:
        with self._lock:
            self._free += 1


class _StepEnding(Exception):
    """A download not started because the step is ending (`_RunAhead.close`): nobody reads its outcome."""


class _Turns:
    """At most `limit` items worked on at once; a retry delay is slept without a turn.

    The turns are tokens in a SimpleQueue, not a threading.Semaphore: the
    queue blocks in C with the GIL released, while the Semaphore is Python
    code around a Condition, which at thousands of items a second kept twice
    the workers' threads waking each other for the GIL.
    """

    def __init__(self, limit: int, naps: Naps) -> None:
        self._tokens: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(limit):
            self._tokens.put(None)
        self.naps = naps  # the pool is told of each sleep, and may start a spare thread meanwhile

    def __enter__(self) -> "_Turns":
        self._tokens.get()
        return self

    def __exit__(self, *_exc) -> None:
        self._tokens.put(None)

    def sleep(self, seconds: float) -> None:
        self._tokens.put(None)
        try:
            self.naps.sleep(seconds)
        finally:
            self._tokens.get()


def _download_one(runtime: Runtime, task: Task, step: _BatchContext, keep_body: bool = True) -> ItemOutcome:
    halted = step.halted
    started = time.time()
    if task.platform in halted:
        return ItemOutcome(task, None, halted[task.platform], task.attempts, started, 0.0)
    if task.expected_sha256 and runtime.store.exists(task.expected_sha256):
        # Dedup before download: the feed told us the hash and we hold those bytes.
        with contextlib.suppress(OSError):  # a .part of ours (we hold the row) is useless now
            runtime.store.staging_path(task.staging_name).unlink(missing_ok=True)
        return ItemOutcome(task, None, None, task.attempts, started, 0.0, already_stored=True)
    if runtime.store.free_bytes() < runtime.config.min_free_bytes:
        error = CrawlError(ErrorClass.DISK_FULL, "free space below min_free_bytes: not admitting downloads")
        halted.setdefault(task.platform, error)
        return ItemOutcome(task, None, error, task.attempts, started, 0.0)
    adapter = runtime.adapter(task.platform)
    attempts = {"n": 0, "validator": task.etag, "attempt_started": started}

    # The item as the adapter's hooks see it, made only for hooks that may read it.
    record = None if step.record_free(adapter) else task.as_record()

    def resolve() -> str:
        return adapter.resolve(task.as_record() if record is None else record).media_url

    def on_attempt(report: AttemptReport) -> None:
        attempts["n"] = report.attempt
        attempts["validator"] = report.validator
        now = time.time()
        if report.error is not None and report.delay_s is not None:  # the final failure is logged by _record
            log_item(stage="download", platform=task.platform, canonical_url=task.canonical_url, outcome="retry",
                     error_class=report.error.error_class.value, attempt=task.attempts + report.attempt,
                     task_id=task.id, duration_ms=(now - attempts["attempt_started"]) * 1000,
                     retry_in_s=round(report.delay_s, 2), message=report.error.message)
        attempts["attempt_started"] = now + (report.delay_s or 0.0)  # the retry loop sleeps, then tries again

    url = task.media_url
    lifetime = None if record is None else adapter.url_lifetime_for(record)
    try:
        if lifetime and (task.resolved_at or 0) + lifetime * 0.9 < time.time():
            url = resolve()  # the signed URL is (nearly) expired: ask the platform for a fresh one
        request = DownloadRequest(
            url, runtime.store.staging_path(task.staging_name),
            headers={} if record is None else adapter.download_headers(record),
            validator=task.etag, expected_size=task.expected_size, platform=task.platform,
            resolve=resolve if task.resolve_ref else None, keep_body=keep_body,
        )
        result = download_with_retries(runtime.session, request, step.policy(runtime, task.platform), on_attempt)
        error = None
        crash_point(AFTER_PART_WRITE)
    except CrawlError as exc:
        result, error = None, exc
        if exc.policy.stops_platform or exc.policy.stops_admission:
            halted.setdefault(task.platform, exc)
    if step.breaker.record(task.platform, error):
        # The platform is down, not this item: stop handing its items out this run.
        halted.setdefault(task.platform, error)
    duration = (time.time() - started) * 1000
    return ItemOutcome(task, result, error, task.attempts + max(attempts["n"], 1), started, duration,
                       validator=attempts["validator"])


def _count_follow_up(report: StageReport, task: Task, settled: Any) -> None:
    """What settling the item in the worker did, in the download report: a failed verify or
    commit is an unfinished item like a failed download (the step's retry and the
    partition's failure look at those), a commit is counted as stored or deduplicated."""
    if settled.error is not None:
        state = settled.transition.columns()["state"]
        report.add_failure(task.canonical_url, settled.error.error_class.value, settled.error.message, state)
        if state == GONE:
            report.gone += 1
        else:
            report.still_unfinished += 1
    elif settled.stored is not None:
        counted = "items_committed" if settled.stored.created else "items_deduplicated"
        report.extra[counted] = report.extra.get(counted, 0) + 1
        if settled.stored.created:  # what the commit step reports as `bytes` when it commits
            report.extra[BYTES_COMMITTED] = report.extra.get(BYTES_COMMITTED, 0) + settled.stored.size


def _record(report: StageReport, item: ItemOutcome, halted: dict[str, CrawlError]) -> Transition:
    """Turn one item's outcome into its ledger transition and its log line."""
    task = item.task
    if item.already_stored:
        report.skipped += 1
        log_item(stage="download", platform=task.platform, canonical_url=task.canonical_url, outcome="skipped",
                 task_id=task.id, attempt=task.attempts, duration_ms=item.duration_ms, bytes=task.expected_size,
                 reason="content already stored")
        return AlreadyCommitted(task.expected_sha256)
    if item.error is None:
        result = item.result
        report.ok += 1
        report.bytes += result.bytes_received
        report.durations_ms.append(item.duration_ms)
        line = {"stage": "download", "platform": task.platform, "canonical_url": task.canonical_url, "outcome": "ok",
                "task_id": task.id, "attempt": item.attempts, "duration_ms": item.duration_ms,
                "bytes": result.size, "bytes_received": result.bytes_received}
        if result.resumed_from:  # (left out, not None, when nothing was resumed: the merged line then needs no sifting)
            line["resumed_from"] = result.resumed_from
        downloaded = Downloaded(result.sha256, result.size, result.validator, item.started_at, item.attempts,
                                response=result.response_said())
        if item.follow_up is None:
            log_item(**line)
            return downloaded
        # Settled in the worker (fetch-urls): one line for the three stages, not three
        # (at thousands of items a second the lines were a tenth of the interpreter's work).
        log_stages([line, *item.follow_up.lines])
        _count_follow_up(report, task, item.follow_up)
        return Then(downloaded, item.follow_up.transition)
    error = item.error
    if task.platform in halted and error is halted[task.platform] and item.duration_ms == 0.0:
        # Not attempted: the platform (or the disk) stopped this run. Hand it back untouched.
        report.still_unfinished += 1
        log_item(stage="download", platform=task.platform, canonical_url=task.canonical_url, outcome="deferred",
                 task_id=task.id, attempt=task.attempts, duration_ms=0.0, error_class=error.error_class.value,
                 reason="platform halted in this run")
        return HandedBack(error)
    retry_at = None
    if error.policy.retryable and item.attempts < errors.ATTEMPTS.per_item:
        delay = policy_for(error.error_class).backoff(item.attempts, error.retry_after)
        retry_at = time.time() + min(CROSS_RUN_BACKOFF_CAP_S, max(delay, 2.0 ** min(item.attempts, 10)))
    failed = DownloadFailed(FailedAttempt(error, item.attempts, retry_at), validator=item.validator)
    report.add_failure(task.canonical_url, error.error_class.value, error.message, failed.state)
    if failed.state == GONE:
        report.gone += 1
    else:
        report.still_unfinished += 1
    log_item(stage="download", platform=task.platform, canonical_url=task.canonical_url, outcome="failed",
             task_id=task.id, attempt=item.attempts, error_class=error.error_class.value,
             platform_code=error.platform_code, final_state=failed.state, message=error.message,
             duration_ms=item.duration_ms)
    return failed

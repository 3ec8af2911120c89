"""Stage 1, feed normalization: page a source's feed for one day into ledger rows."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

from media_crawler.errors import CrawlError
from media_crawler.models import DayWindow, ItemError, MediaRecord, Source
from media_crawler.observe.events import correlation, current_correlation, log_item
from media_crawler.pipeline.report import StageReport
from media_crawler.pipeline.runtime import Runtime
from media_crawler.crashpoints import AFTER_DISCOVERY_BATCH, crash_point
from media_crawler.store.states import FINISHED_STATES, GONE

if TYPE_CHECKING:  # the ledger (SQLAlchemy) is imported after the feed's first request (fetch_list)
    from media_crawler.store.ledger import DiscoverySummary

BATCH = 200


@dataclass
class SourceFailure:
    """A source whose feed walk failed in this step: what a partition's metadata names."""

    source_key: str
    error: CrawlError
    since: float  # when this source's feed first failed for the day (its oldest open feed error)


@dataclass
class ShardDiscovery:
    report: StageReport
    sources: int = 0
    feeds_walked: int = 0
    feeds_already_done: int = 0
    failures: list[SourceFailure] = field(default_factory=list)
    # Sources whose feed this step walked and found nothing published on the day: said aloud
    # (`crawl` prints them), so an empty day never passes for a silent success.
    empty_sources: list[str] = field(default_factory=list)

    @property
    def retryable(self) -> list[SourceFailure]:
        return [failure for failure in self.failures if failure.error.policy.retryable]

    def retry_after_s(self) -> float | None:
        """The longest wait a platform asked for among the retryable failures."""
        waits = [failure.error.retry_after for failure in self.retryable if failure.error.retry_after is not None]
        return max(waits) if waits else None


def discover_sources(runtime: Runtime, sources: Sequence[Source], window: DayWindow,
                     run_id: str | None = None) -> ShardDiscovery:
    """Walk the feed of every source of a shard partition for the day, several at once.

    A real platform API answers in 100-300 ms, so a shard of a few hundred sources
    walked one after another keeps its download threads idle for minutes: the walks
    run on the run's threads (`runtime.download_threads`, the two stages never
    overlap in a step), and the platform's shared rate budget, taken before every
    request, still bounds what they send together.

    A failing source does not stop the others; its failure is recorded (feed
    errors) and returned, named, for the partition's metadata. A source whose
    walk already finished in this run (a step retry after another source's
    transient failure) is not walked again. A new run walks every feed: the walk
    refreshes the signed URLs of unfinished items and gives failed ones a fresh
    budget (Ledger.record_discovered). Outcomes are gathered in the sources' order,
    so the report reads the same whatever order the walks finish in.
    """
    from media_crawler.download.retry import slow_down_if_asked
    from media_crawler.store.source_state import finished_feeds, mark_feed_finished, open_feed_error_since

    outcome = ShardDiscovery(StageReport("fetch"), sources=len(sources))
    day = window.day.isoformat()
    done = finished_feeds(runtime.ledger, [source.key for source in sources], day, run_id) if run_id else set()
    pending = [source for source in sources if source.key not in done]
    outcome.feeds_already_done = len(sources) - len(pending)
    for platform in {source.platform for source in pending}:
        runtime.adapter(platform)  # built here, once, not raced for by the walking threads

    ids = current_correlation()  # the feed threads do not inherit the step's context variables

    def walk(source: Source) -> StageReport | SourceFailure:
        try:
            with correlation(**ids):  # so every fetch line names its run, partition and step
                report = discover(runtime, source, window, run_id=run_id)
        except CrawlError as error:
            slow_down_if_asked(runtime.budget_for(source.platform), source.platform, error)
            since = open_feed_error_since(runtime.ledger, source.key, day) or time.time()
            return SourceFailure(source.key, error, since)
        mark_feed_finished(runtime.ledger, source.key, day, report.new, run_id)
        return report

    threads = max(1, min(runtime.download_threads, len(pending)))
    if threads == 1:
        results = [walk(source) for source in pending]
    else:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="feed") as pool:
            results = list(pool.map(walk, pending))
    for source, result in zip(pending, results):
        if isinstance(result, SourceFailure):
            outcome.failures.append(result)
        else:
            outcome.feeds_walked += 1
            outcome.report.absorb(result)
            if result.new == 0 and result.skipped == 0:
                outcome.empty_sources.append(source.key)
    return outcome


def discover(runtime: Runtime, source: Source, window: DayWindow, run_id: str | None = None, *,
             new_item_lines: bool = True) -> StageReport:
    """Fetch and normalize the partition's feed pages; record new items.

    A page-level failure (rate limit, auth, schema drift) is recorded in the
    ledger's feed errors and re-raised: the partition must not look complete.
    Items already in the seen-set (committed or gone) are skipped.
    new_item_lines=False: a new item gets no fetch line of its own (fetch-urls, whose
    one line per item comes when the item is settled; the source's line counts them).
    """
    report = StageReport("fetch")
    adapter = runtime.adapter(source.platform)
    day = window.day.isoformat()
    started = time.monotonic()
    batch: list[MediaRecord] = []

    def flush() -> None:
        flushed_at = time.time()
        summary = runtime.ledger.record_discovered(batch, source_key=source.key, day=day, run_id=run_id)
        crash_point(AFTER_DISCOVERY_BATCH)
        _log_discovered(runtime, batch, summary, flushed_at, new_item_lines)
        report.new += summary.new + summary.requeued
        report.skipped += summary.skipped_seen
        report.extra["items_in_progress"] = report.extra.get("items_in_progress", 0) + summary.in_progress
        report.extra["items_requeued"] = report.extra.get("items_requeued", 0) + summary.requeued
        batch.clear()

    item_errors: list[ItemError] = []
    keeper = None  # the runtime's answer keeper, read once (its property takes a lock), at the first item
    try:
        # The runtime is the walk's CursorStore: its ledger is wanted after the first page.
        for item in adapter.iter_records(source, window, runtime):
            if isinstance(item, ItemError):
                item_errors.append(item)
                report.add_failure(item.item_id or source.key, item.error_class, item.message, GONE)
                log_item(stage="fetch", platform=source.platform, canonical_url=item.item_id or "",
                         outcome="failed", error_class=item.error_class, message=item.message, source=source.key,
                         day=day)
                continue
            if keeper is None:
                keeper = runtime.answer_keeper
            batch.append(_with_answer(item, keeper))
            if len(batch) >= BATCH:
                flush()
        flush()
    except CrawlError as error:
        if batch:
            flush()
        runtime.ledger.record_feed_error(source_key=source.key, day=day, platform=source.platform, error=error,
                                         raw_body=getattr(error, "raw_body", None), run_id=run_id)
        log_item(stage="fetch", platform=source.platform, canonical_url=source.key, outcome="failed",
                 error_class=error.error_class.value, platform_code=error.platform_code, message=error.message,
                 duration_ms=(time.monotonic() - started) * 1000, source=source.key, day=day)
        raise
    # The walk read every page: its page errors are over, and the items it could not
    # read are the ones `failures` shows now (those of earlier walks are resolved).
    runtime.ledger.resolve_feed_errors(source_key=source.key, day=day)
    runtime.ledger.record_item_errors(source_key=source.key, day=day, errors=item_errors, run_id=run_id)
    report.durations_ms.append((time.monotonic() - started) * 1000)
    log_item(stage="fetch", platform=source.platform, canonical_url=source.key, outcome="ok",
             duration_ms=report.durations_ms[0], source=source.key, day=day, items_new=report.new,
             items_skipped=report.skipped)
    return report


# The key of an item's metadata naming the kept API answer it was read from (export's manifest).
ANSWER_META_KEY = "api_answer_sha256"


def _with_answer(record: MediaRecord, keeper) -> MediaRecord:
    """The record with the sha256 of the answer it was read from in its metadata (the last
    answer this thread kept: adapters yield an item after fetching what lists it)."""
    sha256 = keeper.last_kept() if keeper is not None else None
    if sha256 is None:
        return record
    # dataclasses.replace, less its cost: a copy of the record's fields with the new meta.
    # replace() ran __init__ again (every field set through the frozen class's guard),
    # several microseconds per item of a 5,000-item list, for fields already checked.
    copy = object.__new__(type(record))
    copy.__dict__.update(record.__dict__)
    copy.__dict__["meta"] = {**record.meta, ANSWER_META_KEY: sha256}
    return copy


def _log_discovered(runtime: Runtime, batch: list[MediaRecord], summary: DiscoverySummary, flushed_at: float,
                    new_item_lines: bool) -> None:
    """One fetch line per record of the batch, with the ledger row id it now has.

    The page, not the item, is what was fetched, so per-item lines carry no
    duration (the source-level line does); `skipped` means the seen-set or a
    run in progress already holds the item. The rows are those record_discovered
    left (summary.rows); only one a concurrent run inserted first is read again.
    """
    if not batch or (not new_item_lines and summary.new == len(batch)):
        return  # every record new, and new ones get no line here (fetch-urls)
    rows = summary.rows
    unseen = {record.item_id for record in batch if record.key not in rows}
    if unseen:
        # The ledger's reads (SQLAlchemy) imported here: a feed's first request needs none (fetch_list).
        from media_crawler.store.reports.reads import rows_by_identity

        platform = batch[0].platform
        rows = {**rows, **{(platform, item_id, variant): row for (item_id, variant), row
                           in rows_by_identity(runtime.ledger, platform, unseen).items()}}
    for record in batch:
        row = rows.get(record.key)
        if row is None:
            continue
        if row.state in FINISHED_STATES or (row.queued_at or 0) < flushed_at:
            outcome, reason = "skipped", "seen" if row.state in FINISHED_STATES else "in_progress"
        else:
            outcome, reason = "ok", "new" if (row.discovered_at or 0) >= flushed_at else "requeued"
            if reason == "new" and not new_item_lines:
                continue
        log_item(stage="fetch", platform=record.platform, canonical_url=record.canonical_url, outcome=outcome,
                 task_id=row.id, attempt=row.attempts, reason=reason, state=row.state)

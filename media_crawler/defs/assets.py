"""The four stages as partitioned assets. Thin wiring: the work is in pipeline/.

Assets hand work to each other through the ledger (rows advance from
discovered to committed), so each returns only aggregate metadata. A partition
is one shard of a platform's sources for one day (media_crawler/shards.py);
every stage works on all of the shard's sources at once.

The assets are built for a partition layout (`build_crawl_assets`), because the
shard keys and the first day come from sources.yaml; definitions.py builds them
once for the code location's configuration.
"""

import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetsDefinition,
    Backoff,
    Failure,
    Jitter,
    MaterializeResult,
    MetadataValue,
    RetryPolicy,
    RetryRequested,
    TableColumn,
    TableRecord,
    TableSchema,
    asset,
)

from media_crawler.defs.failing import failing_at_once
from media_crawler.defs.partitions import crawl_partitions, split_partition_key
from media_crawler.errors import POLICIES, FinalState
from media_crawler.defs.resources import PlatformsResource
from media_crawler.observe.events import correlation
from media_crawler.observe.logging import ensure_configured
from media_crawler.pipeline.credentials import refuse_unset_credentials
from media_crawler.pipeline.discover import ShardDiscovery, discover_sources
from media_crawler.pipeline.layout import check_layout
from media_crawler.pipeline.download import download_partition
from media_crawler.pipeline.integrity import partition_blob_mismatches, partition_progress
from media_crawler.pipeline.mux_tracks import mux_partition
from media_crawler.pipeline.report import StageReport
from media_crawler.pipeline.verify_commit import commit_partition, verify_partition
from media_crawler.recovery.runs import record_run_process
from media_crawler.store.source_state import iso_time, open_feed_errors
from media_crawler.models import DayWindow, Source
from media_crawler.pipeline.runtime import Runtime
from media_crawler.scrub import excerpt, scrub_text, scrub_url
from media_crawler.shards import PartitionLayout

GROUP = "media_crawl"
# Whole-step failures only (a dead API, a killed process); items retry inside the step.
# A configuration, auth, parse or policy error fails the step at once (defs/failing.py).
STEP_RETRY = RetryPolicy(max_retries=3, delay=2, backoff=Backoff.EXPONENTIAL, jitter=Jitter.PLUS_MINUS)
# First wait before media_downloads runs again for its transient failures (doubles per retry).
DOWNLOAD_RETRY_WAIT_S = 5.0
# First wait before media_records walks again the feeds that failed transiently,
# unless the platform said how long (Retry-After).
FEED_RETRY_WAIT_S = 2.0
# Checks are named <asset>_<property>.
HASHES_MATCH = "committed_media_hashes_match"
NOTHING_GONE = "committed_media_nothing_gone"
# The classes whose items end gone, from the error table (errors.py), named in the check.
GONE_CLASSES = ", ".join(sorted(c.value for c, policy in POLICIES.items() if policy.final_state is FinalState.GONE))
EMPTY_SOURCES_KEY = "empty_sources"  # media_records metadata: sources with nothing published on the day
EMPTY_SOURCES_NAMED = 50  # keys named in it at most (sources_empty counts them all)


@dataclass(frozen=True)
class Scope:
    """What one step of a partition works on."""

    runtime: Runtime
    shard: str
    sources: list[Source]
    window: DayWindow


@contextmanager
def _stage(context: AssetExecutionContext, platforms: PlatformsResource):
    ensure_configured()  # item events as JSON lines on stdout, not in Dagster's event log
    record_run_process(context)  # so a restart can tell this run died with its process (recovery/runs.py)
    shard, window = split_partition_key(context.partition_key)
    with failing_at_once():
        runtime = platforms.runtime()
        check_layout(runtime.ledger, runtime.config, instance=context.instance, shard=shard)
        sources = runtime.config.sources_in(shard)
        with correlation(run_id=context.run_id, partition=str(context.partition_key),
                         step=context.asset_key.to_user_string()):
            refuse_unset_credentials(runtime, sources, window, run_id=context.run_id)  # before any request
            yield Scope(runtime, shard, sources, window)


def _failures_table(report: StageReport) -> MetadataValue:
    schema = TableSchema(columns=[TableColumn("canonical_url"), TableColumn("error_class"), TableColumn("state"),
                                  TableColumn("message")])
    rows = [TableRecord({"canonical_url": scrub_url(f.canonical_url or ""), "error_class": f.error_class,
                         "state": f.state, "message": excerpt(f.message, 300)}) for f in report.failed_items]
    return MetadataValue.table(rows, schema=schema)


def _failed_sources_table(rows: list[dict]) -> MetadataValue:
    schema = TableSchema(columns=[TableColumn("source"), TableColumn("error_class"), TableColumn("since"),
                                  TableColumn("message")])
    return MetadataValue.table([TableRecord({**row, "message": excerpt(row["message"], 300)}) for row in rows],
                               schema=schema)


def _result(report: StageReport, **extra) -> MaterializeResult:
    metadata = scrubbed({**report.as_metadata(), **extra})
    if report.failed_items:
        metadata["failures"] = _failures_table(report)
    return MaterializeResult(metadata=metadata)


def scrubbed(metadata: dict) -> dict:
    """Text metadata values through the scrubber: Dagster's event log is storage too."""
    return {key: scrub_text(value) if isinstance(value, str) else value for key, value in metadata.items()}


def _discovery_metadata(found: ShardDiscovery) -> dict:
    metadata = {"sources": found.sources, "feeds_walked": found.feeds_walked,
                "feeds_already_done": found.feeds_already_done, "sources_failed": len(found.failures),
                "sources_empty": len(found.empty_sources)}
    if found.empty_sources:  # the keys, for `crawl` to say which published nothing (bounded: a text value)
        metadata[EMPTY_SOURCES_KEY] = " ".join(found.empty_sources[:EMPTY_SOURCES_NAMED])
    if found.failures:
        metadata["failed_sources"] = _failed_sources_table([
            {"source": failure.source_key, "error_class": failure.error.error_class.value,
             "since": iso_time(failure.since), "message": failure.error.message} for failure in found.failures])
    return metadata


def feed_retry_wait(found: ShardDiscovery, retry_number: int) -> float | None:
    """Seconds before media_records walks its transiently failed feeds again: the longest
    Retry-After a platform sent, else a doubling wait; None when nothing is to be retried
    (no transient failure, or the step's retries are spent)."""
    if not found.retryable or retry_number >= STEP_RETRY.max_retries:
        return None
    asked = found.retry_after_s()
    return asked if asked is not None else FEED_RETRY_WAIT_S * (2 ** retry_number)


@lru_cache(maxsize=16)
def build_crawl_assets(layout: PartitionLayout) -> tuple[AssetsDefinition, ...]:
    """The four stage assets, partitioned by `layout` (one set per layout, cached)."""
    partitions = crawl_partitions(layout)

    @asset(partitions_def=partitions, group_name=GROUP, retry_policy=STEP_RETRY, kinds={"python"})
    def media_records(context: AssetExecutionContext, platforms: PlatformsResource) -> MaterializeResult:
        """Media records of one shard's sources for one publication day.

        Pages each source's feed (stopping at the first page older than the day),
        normalizes every post into one record per media variant (keyed on the
        platform's own id, never on a signed CDN URL) and adds new ones to the
        ledger. Items the seen-set already holds are counted as skipped. A
        source whose feed fails does not stop the others: it is named in this
        materialization, in `failures`, and committed_media fails the partition.
        """
        with _stage(context, platforms) as scope:
            found = discover_sources(scope.runtime, scope.sources, scope.window, run_id=context.run_id)
        wait = feed_retry_wait(found, context.retry_number)
        if wait is not None:
            # Transient (rate limit, 5xx, network): walk those feeds again (only those:
            # the others are recorded as done in this run) after the time the platform asked for.
            raise RetryRequested(max_retries=STEP_RETRY.max_retries, seconds_to_wait=wait)
        return _result(found.report, **_discovery_metadata(found))

    @asset(partitions_def=partitions, group_name=GROUP, retry_policy=STEP_RETRY, deps=[media_records],
           kinds={"python"})
    def media_downloads(context: AssetExecutionContext, platforms: PlatformsResource) -> MaterializeResult:
        """Media bytes of the partition, streamed into the store's staging area.

        Each item goes to a `.part` file, hashed while writing, resumed with
        Range/If-Range after a cut, retried per item by error class (Retry-After
        honoured), within the platform's shared rate budget.
        """
        with _stage(context, platforms) as scope:
            report = download_partition(scope.runtime, scope.sources, scope.window, run_id=context.run_id,
                                        ignore_backoff=context.retry_number > 0)
        halted = report.extra.get("platforms_halted", 0)
        if report.still_unfinished and not halted and context.retry_number < STEP_RETRY.max_retries:
            # Come back later for the transient failures, without holding a worker
            # while the platform recovers; what downloaded already stays staged.
            # Not when the platform was halted (down, auth, disk): seconds will not
            # fix that, and retrying would only spend the items' attempts. The
            # partition fails and the unfinished-partitions sensor comes back later.
            raise RetryRequested(max_retries=STEP_RETRY.max_retries,
                                 seconds_to_wait=DOWNLOAD_RETRY_WAIT_S * (2 ** context.retry_number))
        return _result(report)

    @asset(partitions_def=partitions, group_name=GROUP, retry_policy=STEP_RETRY, deps=[media_downloads],
           kinds={"python"})
    def verified_media(context: AssetExecutionContext, platforms: PlatformsResource) -> MaterializeResult:
        """Staged downloads that passed verification: size, sha256, magic bytes
        (HTML served instead of media is rejected), a Pillow decode with a
        decompression-bomb guard, and the MP4 box structure."""
        with _stage(context, platforms) as scope:
            report = verify_partition(scope.runtime, scope.sources, scope.window)
        return _result(report)

    @asset(
        partitions_def=partitions, group_name=GROUP, retry_policy=STEP_RETRY, deps=[verified_media],
        kinds={"python"},
        check_specs=[
            AssetCheckSpec(HASHES_MATCH, asset="committed_media", blocking=True,
                           description="Every blob of this partition is in the store; those committed by this run re-hash to their names."),
            AssetCheckSpec(NOTHING_GONE, asset="committed_media",
                           description=f"Warns about items that are permanently unavailable ({GONE_CLASSES}); "
                                       "an item refused by the host lists (host_not_allowed) fails the partition instead."),
        ],
    )
    def committed_media(context: AssetExecutionContext, platforms: PlatformsResource):
        """Verified media in the content-addressed store (`sha256/aa/bb/<sha256>`), and for
        DASH videos a muxed MP4 of the tracks when ffmpeg is on PATH (pipeline/mux_tracks.py).

        fsync, then an atomic put-if-absent link: a blob is absent or whole, and
        identical content is stored once. The partition fails while any item is
        still unfinished after its retries, or any source's feed failed for the
        day; permanently unavailable items are reported by a check but do not
        keep the partition red.
        """
        with _stage(context, platforms) as scope:
            runtime, sources, window = scope.runtime, scope.sources, scope.window
            commit_started = time.time()
            report = commit_partition(runtime, sources, window)
            mux_partition(runtime, sources, window, report)
            progress = partition_progress(runtime, sources, window)
            mismatches = partition_blob_mismatches(runtime, sources, window, rehash_since=commit_started)
            failed_feeds = open_feed_errors(runtime.ledger, [source.key for source in sources], window.day.isoformat())
        if progress.unfinished or failed_feeds:
            problems = []
            if failed_feeds:
                named = ", ".join(f"{row['source']} ({row['error_class']} since {row['since']})" for row in failed_feeds[:5])
                problems.append(f"the feed of {len(failed_feeds)} source(s) failed: {named}")
            if progress.unfinished:
                problems.append(f"{progress.unfinished} item(s) are unfinished after their retries ({progress.describe()})")
            raise Failure(
                description=scrub_text(f"{scope.shard} {window.day}: {'; '.join(problems)}; re-run the partition to "
                                       "finish them"),
                metadata={**scrubbed({**report.as_metadata(), **progress.as_metadata(),
                                      "sources_failed": len(failed_feeds)}),
                          "unfinished": _failures_table(progress.report),
                          **({"failed_sources": _failed_sources_table(failed_feeds)} if failed_feeds else {})},
                allow_retries=False,
            )
        yield _result(report, sources=len(sources), **progress.as_metadata())
        yield AssetCheckResult(
            check_name=HASHES_MATCH, passed=not mismatches,
            metadata={"blobs_checked": progress.committed, "mismatches": len(mismatches),
                      "mismatched": MetadataValue.json(mismatches[:20])},
            description="all committed blobs are present; this run's commits re-hash to their names" if not mismatches
            else f"{len(mismatches)} blob(s) missing or not matching their names",
        )
        yield AssetCheckResult(
            check_name=NOTHING_GONE, passed=progress.gone == 0, severity=AssetCheckSeverity.WARN,
            metadata={"items_gone": progress.gone, "gone": _failures_table(progress.report)},
            description=f"{progress.gone} item(s) permanently unavailable" if progress.gone else "no item is gone",
        )

    return media_records, media_downloads, verified_media, committed_media

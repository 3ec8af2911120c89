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
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetsDefinition,
    Backoff,
    Failure,
    Jitter,
    MetadataValue,
    RetryPolicy,
    RetryRequested,
    TableColumn,
    TableRecord,
    TableSchema,
    asset,
)

from media_crawler.defs.partition_range import (
    Scope,
    each_partition,
    errors_failure,
    is_ranged,
    materialize_each,
    partition_label,
    range_failure,
)
from media_crawler.defs.partitions import crawl_partitions
from media_crawler.errors import POLICIES, FinalState
from media_crawler.defs.resources import PlatformsResource
from media_crawler.pipeline.discover import ShardDiscovery, discover_sources
from media_crawler.pipeline.integrity import PartitionProgress, partition_blob_mismatches, partition_progress
from media_crawler.pipeline.mux_tracks import mux_partition
from media_crawler.pipeline.report import StageReport
from media_crawler.pipeline.settle_in_place import download_stage, settles_in_place
from media_crawler.pipeline.verify_commit import commit_partition, verify_partition
from media_crawler.store.source_state import iso_time, open_feed_errors
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


def _metadata(report: StageReport, **extra) -> dict:
    metadata = scrubbed({**report.as_metadata(), **extra})
    if report.failed_items:
        metadata["failures"] = _failures_table(report)
    return metadata


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


def range_retry_wait(found: list[ShardDiscovery], retry_number: int) -> float | None:
    """feed_retry_wait over the partitions of a run: the step is retried as a whole, so it waits
    for the longest of them (the feeds already walked in this run are not walked again)."""
    waits = [wait for wait in (feed_retry_wait(one, retry_number) for one in found) if wait is not None]
    return max(waits) if waits else None


@dataclass(frozen=True)
class PartitionCommit:
    """What committed_media found of one partition."""

    scope: Scope
    report: StageReport
    progress: PartitionProgress
    mismatches: list
    failed_feeds: list[dict]

    def problem(self) -> str | None:
        """The partition's failure line, or None when it is done: every item finished, every feed walked."""
        if not (self.progress.unfinished or self.failed_feeds or self.mismatches):
            return None
        problems = []
        if self.mismatches:
            # A blob lost or rotted is not done, whatever the ledger says: the partition is red
            # until `reconcile --repair` re-queues the item and a re-run stores it again.
            problems.append(f"{len(self.mismatches)} blob(s) missing or not matching their names "
                            f"(media-crawler reconcile --repair re-queues them)")
        if self.failed_feeds:
            named = ", ".join(f"{row['source']} ({row['error_class']} since {row['since']})" for row in self.failed_feeds[:5])
            problems.append(f"the feed of {len(self.failed_feeds)} source(s) failed: {named}")
        if self.progress.unfinished:
            problems.append(f"{self.progress.unfinished} item(s) are unfinished after their retries "
                            f"({self.progress.describe()})")
        return scrub_text(f"{partition_label(self.scope.key)}: {'; '.join(problems)}; re-run the partition to finish them")

    def failure_metadata(self) -> dict:
        return {**scrubbed({**self.report.as_metadata(), **self.progress.as_metadata(),
                            "sources_failed": len(self.failed_feeds)}),
                "unfinished": _failures_table(self.progress.report),
                **({"failed_sources": _failed_sources_table(self.failed_feeds)} if self.failed_feeds else {})}

    def metadata(self) -> dict:
        return _metadata(self.report, sources=len(self.scope.sources), **self.progress.as_metadata())


def _run_started(context: AssetExecutionContext) -> float | None:
    """When this run started (Dagster's record), or None when it has no start time."""
    record = context.instance.get_run_record_by_id(context.run_id)
    return record.start_time if record is not None else None


def _commit_one(scope: Scope, run_started: Callable[[], float | None] = lambda: None) -> PartitionCommit:
    runtime, sources, window = scope.runtime, scope.sources, scope.window
    commit_started = time.time()
    # With an object store this run's commits were made by its download step
    # (pipeline/settle_in_place.py): re-hash what was committed since the run started.
    # (Another machine's clock wrote committed_at: a skew of seconds only spares a blob its re-hash.)
    run_start = run_started() if settles_in_place(runtime) else None
    if run_start is not None:
        commit_started = min(commit_started, run_start)
    report = commit_partition(runtime, sources, window)
    mux_partition(runtime, sources, window, report)
    progress = partition_progress(runtime, sources, window)
    mismatches = partition_blob_mismatches(runtime, sources, window, rehash_since=commit_started)
    failed_feeds = open_feed_errors(runtime.ledger, [source.key for source in sources], window.day.isoformat())
    return PartitionCommit(scope, report, progress, mismatches, failed_feeds)


def _committed_media_failure(failed: list[PartitionCommit], errors: dict[str, Exception]) -> Failure:
    """One partition: its line and tables, as a run of one partition always reported. Several (a
    ranged run): a line each, and each partition's tables under its shard's name."""
    if len(failed) == 1 and not errors:
        [only] = failed
        return Failure(description=only.problem(), metadata=only.failure_metadata(), allow_retries=False)
    metadata = {f"{one.scope.shard} {name}": value for one in failed for name, value in one.failure_metadata().items()
                if name in ("unfinished", "failed_sources")}
    return range_failure({**{one.scope.key: one.problem() for one in failed}, **errors}, metadata=metadata)


def _check_results(commits: list[PartitionCommit], ranged: bool):
    """The two checks, once per run (Dagster evaluates a check once per run, with no partition):
    a ranged run's metadata says which partition each finding is of."""
    mismatches = [({"partition": one.scope.key, **m} if ranged and isinstance(m, dict) else m)
                  for one in commits for m in one.mismatches]
    committed = sum(one.progress.committed for one in commits)
    gone = sum(one.progress.gone for one in commits)
    by_partition = ({"by_partition": MetadataValue.json({one.scope.key: {"mismatches": len(one.mismatches),
                                                                         "items_gone": one.progress.gone}
                                                         for one in commits})} if ranged else {})
    yield AssetCheckResult(
        check_name=HASHES_MATCH, passed=not mismatches,
        metadata={"blobs_checked": committed, "mismatches": len(mismatches),
                  "mismatched": MetadataValue.json(mismatches[:20]), **by_partition},
        description="all committed blobs are present; this run's commits re-hash to their names" if not mismatches
        else f"{len(mismatches)} blob(s) missing or not matching their names",
    )
    gone_report = StageReport("commit")
    for one in commits:
        gone_report.absorb(one.progress.report)
    gone_table = _failures_table(gone_report)
    yield AssetCheckResult(
        check_name=NOTHING_GONE, passed=gone == 0, severity=AssetCheckSeverity.WARN,
        metadata={"items_gone": gone, "gone": gone_table, **by_partition},
        description=f"{gone} item(s) permanently unavailable" if gone else "no item is gone",
    )


@lru_cache(maxsize=16)
def build_crawl_assets(layout: PartitionLayout) -> tuple[AssetsDefinition, ...]:
    """The four stage assets, partitioned by `layout` (one set per layout, cached)."""
    partitions = crawl_partitions(layout)

    @asset(partitions_def=partitions, group_name=GROUP, retry_policy=STEP_RETRY, kinds={"python"})
    def media_records(context: AssetExecutionContext, platforms: PlatformsResource):
        """Media records of one shard's sources for one publication day.

        Pages each source's feed (stopping at the first page older than the day),
        normalizes every post into one record per media variant (keyed on the
        platform's own id, never on a signed CDN URL) and adds new ones to the
        ledger. Items the seen-set already holds are counted as skipped. A
        source whose feed fails does not stop the others: it is named in this
        materialization, in `failures`, and committed_media fails the partition.
        """
        outcome = each_partition(context, platforms, lambda scope: discover_sources(
            scope.runtime, scope.sources, scope.window, run_id=context.run_id))
        wait = range_retry_wait([found for _scope, found in outcome.done.values()], context.retry_number)
        if wait is not None:
            # Transient (rate limit, 5xx, network): walk those feeds again (only those:
            # the others are recorded as done in this run) after the time the platform asked for.
            raise RetryRequested(max_retries=STEP_RETRY.max_retries, seconds_to_wait=wait)
        yield from materialize_each(context, {key: _metadata(found.report, **_discovery_metadata(found))
                                              for key, (_scope, found) in outcome.done.items()},
                                    errors_failure(outcome.errors))

    @asset(partitions_def=partitions, group_name=GROUP, retry_policy=STEP_RETRY, deps=[media_records],
           kinds={"python"})
    def media_downloads(context: AssetExecutionContext, platforms: PlatformsResource):
        """Media bytes of the partition, streamed into the store's staging area.

        Each item goes to a `.part` file, hashed while writing, resumed with
        Range/If-Range after a cut, retried per item by error class (Retry-After
        honoured), within the platform's shared rate budget.
        """
        outcome = each_partition(context, platforms, lambda scope: download_stage(
            scope.runtime, scope.sources, scope.window, run_id=context.run_id, ignore_backoff=context.retry_number > 0))
        reports = [report for _scope, report in outcome.done.values()]
        halted = any(report.extra.get("platforms_halted", 0) for report in reports)
        if any(report.still_unfinished for report in reports) and not halted \
                and context.retry_number < STEP_RETRY.max_retries:
            # Come back later for the transient failures, without holding a worker
            # while the platform recovers; what downloaded already stays staged.
            # Not when the platform was halted (down, auth, disk): seconds will not
            # fix that, and retrying would only spend the items' attempts. The
            # partition fails and the unfinished-partitions sensor comes back later.
            raise RetryRequested(max_retries=STEP_RETRY.max_retries,
                                 seconds_to_wait=DOWNLOAD_RETRY_WAIT_S * (2 ** context.retry_number))
        yield from materialize_each(context, {key: _metadata(report) for key, (_scope, report) in outcome.done.items()},
                                    errors_failure(outcome.errors))

    @asset(partitions_def=partitions, group_name=GROUP, retry_policy=STEP_RETRY, deps=[media_downloads],
           kinds={"python"})
    def verified_media(context: AssetExecutionContext, platforms: PlatformsResource):
        """Staged downloads that passed verification: size, sha256, magic bytes
        (HTML served instead of media is rejected), a Pillow decode with a
        decompression-bomb guard, and the MP4 box structure."""
        outcome = each_partition(context, platforms, lambda scope: verify_partition(
            scope.runtime, scope.sources, scope.window))
        yield from materialize_each(context, {key: _metadata(report) for key, (_scope, report) in outcome.done.items()},
                                    errors_failure(outcome.errors))

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
        still unfinished after its retries, any source's feed failed for the
        day, or a blob of the partition is missing or does not hash to its name; permanently unavailable items are reported by a check but do not
        keep the partition red.
        """
        outcome = each_partition(context, platforms, lambda scope: _commit_one(scope, lambda: _run_started(context)))
        commits = [commit for _scope, commit in outcome.done.values()]
        failed = [commit for commit in commits if commit.problem()]
        healthy = {commit.scope.key: commit.metadata() for commit in commits if not commit.problem()}
        # The healthy partitions materialize; the step's failure turns only the others red.
        yield from materialize_each(context, healthy, _committed_media_failure(failed, outcome.errors)
                                    if failed or outcome.errors else None,
                                    then=_check_results(commits, is_ranged(context)))

    return media_records, media_downloads, verified_media, committed_media

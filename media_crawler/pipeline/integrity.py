"""Is a partition finished, and does the store hold what the ledger says it holds?"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from media_crawler.errors import ErrorClass
from media_crawler.models import DayWindow
from media_crawler.pipeline.report import StageReport
from media_crawler.pipeline.runtime import Runtime
from media_crawler.pipeline.scope import Sources, source_keys
from media_crawler.store.blob_rows import committed_blobs
from media_crawler.store.blob_store import RecordedChecksums, rehash
from media_crawler.store.ledger import COMMITTED, FINISHED_STATES, GONE, STATES

# What a partition's report lists: every row that is not committed.
UNFINISHED_OR_GONE = [state for state in STATES if state != COMMITTED]
# Classes a re-run alone does not fix: what to do first, said where the partition fails.
FIX_FIRST = {
    ErrorClass.HOST_NOT_ALLOWED.value: "list the refused hosts in the setting each message names "
                                       "(`media-crawler failures`), then re-run",
}


@dataclass
class PartitionProgress:
    states: Counter
    report: StageReport = field(default_factory=lambda: StageReport("progress"))
    unfinished_classes: Counter = field(default_factory=Counter)  # error class (or "pending") -> rows

    @property
    def committed(self) -> int:
        return self.states.get(COMMITTED, 0)

    @property
    def gone(self) -> int:
        return self.states.get(GONE, 0)

    @property
    def unfinished(self) -> int:
        return sum(count for state, count in self.states.items() if state not in FINISHED_STATES)

    def describe(self) -> str:
        """The rows by state, then the unfinished ones by error class, so a failed
        partition says why without a trip to `failures`."""
        text = ", ".join(f"{state}: {count}" for state, count in sorted(self.states.items()))
        if self.unfinished_classes:
            text += "; unfinished by class: " + ", ".join(
                f"{error_class} {count}" for error_class, count in sorted(self.unfinished_classes.items()))
        hints = [f"{error_class}: {FIX_FIRST[error_class]}" for error_class in sorted(self.unfinished_classes)
                 if error_class in FIX_FIRST]
        return "; ".join([text, *hints])

    def as_metadata(self) -> dict[str, int]:
        return {f"state_{state}": count for state, count in sorted(self.states.items())}


def partition_progress(runtime: Runtime, sources: Sources, window: DayWindow) -> PartitionProgress:
    day = window.day.isoformat()
    keys = source_keys(sources)
    progress = PartitionProgress(Counter(runtime.ledger.state_counts(source_key=keys, day=day)))
    for task in runtime.ledger.tasks(source_key=keys, day=day, states=UNFINISHED_OR_GONE):
        if task.state != COMMITTED:
            progress.report.add_failure(task.canonical_url, task.error_class or "pending", "", task.state)
        if task.state not in FINISHED_STATES:
            progress.unfinished_classes[task.error_class or "pending"] += 1
    return progress


def partition_blob_mismatches(runtime: Runtime, sources: Sources, window: DayWindow,
                              rehash_since: float | None = None) -> list[dict]:
    """Committed rows whose blob is missing or no longer hashes to its name.

    Every blob is checked for presence; only blobs committed at or after
    `rehash_since` (this run's commits) are re-read and hashed, so a rerun of a
    big video partition does not re-hash gigabytes it checked before. A full
    re-hash of the store is `media-crawler reconcile --verify-hashes`.

    A store whose server verified each upload's sha256 and keeps the record (s3://,
    RecordedChecksums) is asked for it instead, one HEAD a blob (size and sha256 against
    the ledger's), unless `rehash_commits: true` asks to download this run's commits again.
    """
    store = runtime.store
    recorded = isinstance(store, RecordedChecksums) and not runtime.config.rehash_commits
    problems = []
    for canonical_url, sha256, committed_at, size in committed_blobs(
            runtime.ledger, source_key=source_keys(sources), day=window.day.isoformat()):
        if recorded:
            problem = store.recorded_problem(sha256, size)
        elif not store.exists(sha256):
            problem = "missing"
        elif (rehash_since is None or (committed_at or 0) >= rehash_since) and rehash(store, sha256) != sha256:
            problem = "hash"
        else:
            problem = None
        if problem is not None:
            problems.append({"canonical_url": canonical_url, "sha256": sha256, "problem": problem})
    return problems

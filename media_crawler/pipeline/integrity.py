"""Is a partition finished, and does the store hold what the ledger says it holds?"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from media_crawler.models import DayWindow, Source
from media_crawler.pipeline.report import StageReport
from media_crawler.pipeline.runtime import Runtime
from media_crawler.store.cas import file_sha256
from media_crawler.store.ledger import COMMITTED, FINISHED_STATES, GONE


@dataclass
class PartitionProgress:
    states: Counter
    report: StageReport = field(default_factory=lambda: StageReport("progress"))

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
        return ", ".join(f"{state}: {count}" for state, count in sorted(self.states.items()))

    def as_metadata(self) -> dict[str, int]:
        return {f"state_{state}": count for state, count in sorted(self.states.items())}


def partition_progress(runtime: Runtime, source: Source, window: DayWindow) -> PartitionProgress:
    day = window.day.isoformat()
    progress = PartitionProgress(Counter(runtime.ledger.state_counts(source_key=source.key, day=day)))
    for task in runtime.ledger.tasks(source_key=source.key, day=day):
        if task.state != COMMITTED:
            progress.report.add_failure(task.canonical_url, task.error_class or "pending", "", task.state)
    return progress


def partition_blob_mismatches(runtime: Runtime, source: Source, window: DayWindow) -> list[dict]:
    """Committed rows whose blob is missing or no longer hashes to its name."""
    problems = []
    for task in runtime.ledger.tasks(source_key=source.key, day=window.day.isoformat(), states=[COMMITTED]):
        path = runtime.store.path_for(task.sha256)
        if not path.is_file():
            problems.append({"canonical_url": task.canonical_url, "sha256": task.sha256, "problem": "missing"})
        elif file_sha256(path) != task.sha256:
            problems.append({"canonical_url": task.canonical_url, "sha256": task.sha256, "problem": "hash"})
    return problems

"""What one stage did to one partition: the numbers Dagster plots and logs show."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# The download step's metadata: the bytes it stored by settling items itself
# (pipeline/settle_in_place.py), counted where a commit step's report counts `bytes`.
BYTES_COMMITTED = "bytes_committed"


@dataclass
class FailedItem:
    """One failed item as a report lists it (the first 50 of a stage)."""

    canonical_url: str
    error_class: str
    message: str
    state: str


@dataclass
class StageReport:
    """What one stage did to one partition: counts, bytes, durations and the failures."""

    stage: str
    new: int = 0
    skipped: int = 0
    ok: int = 0
    failed_by_class: Counter = field(default_factory=Counter)
    bytes: int = 0
    durations_ms: list[float] = field(default_factory=list)
    failed_items: list[FailedItem] = field(default_factory=list)
    still_unfinished: int = 0  # retryable items this stage could not finish
    gone: int = 0  # permanently unavailable items (404, deleted)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> int:
        return sum(self.failed_by_class.values())

    def add_failure(self, canonical_url: str, error_class: str, message: str, state: str) -> None:
        self.failed_by_class[error_class] += 1
        if len(self.failed_items) < 50:  # the UI table stays readable
            self.failed_items.append(FailedItem(canonical_url, error_class, message, state))

    def absorb(self, other: "StageReport") -> None:
        """Add another report of the same stage (one source of a shard) into this one."""
        self.new += other.new
        self.skipped += other.skipped
        self.ok += other.ok
        self.failed_by_class.update(other.failed_by_class)
        self.bytes += other.bytes
        self.durations_ms.extend(other.durations_ms)
        self.failed_items.extend(other.failed_items[:max(0, 50 - len(self.failed_items))])
        self.still_unfinished += other.still_unfinished
        self.gone += other.gone
        for key, value in other.extra.items():
            self.extra[key] = self.extra.get(key, 0) + value if isinstance(value, (int, float)) else value

    def percentile_ms(self, pct: float) -> float:
        if not self.durations_ms:
            return 0.0
        if len(self.durations_ms) == 1:
            return self.durations_ms[0]
        import statistics  # here: with decimal and fractions, 6 ms of fetch-urls' start-up

        return statistics.quantiles(self.durations_ms, n=100, method="inclusive")[int(pct) - 1]

    def as_metadata(self) -> dict[str, Any]:
        """Flat numeric values, so the Dagster UI can plot them over partitions."""
        data: dict[str, Any] = {
            "items_new": self.new,
            "items_skipped": self.skipped,
            "items_ok": self.ok,
            "items_failed": self.failed,
            "items_gone": self.gone,
            "items_unfinished": self.still_unfinished,
            "bytes": self.bytes,
        }
        if self.durations_ms:
            data["p50_ms"] = round(self.percentile_ms(50), 1)
            data["p95_ms"] = round(self.percentile_ms(95), 1)
        for error_class, count in sorted(self.failed_by_class.items()):
            data[f"failed_{error_class}"] = count
        data.update(self.extra)
        return data

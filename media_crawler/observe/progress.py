"""Progress a person can read: items done/total, bytes, rate, ETA.

One counter (`Progress`) and two ways to show it:

- `TerminalSink`: one line on stderr, redrawn in place, only when stderr is a
  terminal; stdout (the JSON log stream) is never touched.
- `LogSink`: a `progress` JSON event every few seconds or every N items, for
  Dagster runs and log pipelines, where nothing is redrawn.

    with Progress("download", total=len(tasks), unit="items", sinks=default_sinks(log=True)) as progress:
        for result in results:
            progress.advance(bytes=result.size)
"""
from __future__ import annotations

import logging
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from media_crawler.platforms.registry import names as platform_names
from media_crawler.observe.events import CORRELATION_KEYS, current_correlation
from media_crawler.observe.logging import LOG_LAG

PROGRESS_LOG = logging.getLogger("media_crawler.progress")
# Present on every progress event, beside `event`, `stage` and the counts.
PROGRESS_KEYS = ("platform", *CORRELATION_KEYS)


@dataclass(frozen=True)
class ProgressSnapshot:
    label: str
    unit: str
    done: int
    total: int | None
    bytes: int
    elapsed_s: float

    @property
    def items_per_s(self) -> float:
        return self.done / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the rate so far; None until there is a rate and a total."""
        if self.total is None or not self.done or self.elapsed_s <= 0:
            return None
        return max(self.total - self.done, 0) / self.items_per_s

    def describe(self) -> str:
        """`download 12/40 items, 3.4 MB, 1.2 MB/s, ETA 0:23`"""
        count = f"{self.done}/{self.total}" if self.total is not None else str(self.done)
        parts = [f"{self.label} {count} {self.unit}"]
        if self.bytes:
            parts += [human_bytes(self.bytes), human_bytes(self.bytes_per_s) + "/s"]
        else:
            parts.append(f"{self.items_per_s:.1f} {self.unit}/s")
        if self.eta_s is not None and self.done < (self.total or 0):
            parts.append("ETA " + clock_text(self.eta_s))
        return ", ".join(parts)

    def as_fields(self) -> dict:
        return {"items_done": self.done, "items_total": self.total, "unit": self.unit, "bytes": self.bytes,
                "items_per_s": round(self.items_per_s, 2), "bytes_per_s": round(self.bytes_per_s),
                "eta_s": None if self.eta_s is None else round(self.eta_s, 1), "elapsed_s": round(self.elapsed_s, 2)}


class ProgressSink(Protocol):
    def update(self, snapshot: ProgressSnapshot, final: bool = False) -> None:
        """Show the snapshot (or decide it is too soon to); `final` is the last call."""


class Progress:
    """Counts items and bytes and hands snapshots to its sinks (thread-safe)."""

    def __init__(self, label: str, total: int | None = None, *, unit: str = "items",
                 sinks: Sequence[ProgressSink] = (), clock: Callable[[], float] = time.monotonic) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.sinks = list(sinks)
        self.clock = clock
        self.done = 0
        self.bytes = 0
        self._started = clock()
        self._lock = threading.Lock()
        self._closed = False

    def snapshot(self) -> ProgressSnapshot:
        return ProgressSnapshot(self.label, self.unit, self.done, self.total, self.bytes, self.clock() - self._started)

    def advance(self, items: int = 1, bytes: int = 0) -> None:  # noqa: A002 - reads well at call sites
        with self._lock:
            self.done += items
            self.bytes += bytes or 0
            snapshot = self.snapshot()
        for sink in self.sinks:
            sink.update(snapshot)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            snapshot = self.snapshot()
        for sink in self.sinks:
            sink.update(snapshot, final=True)

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()


class TerminalSink:
    """Redraws one line on a terminal, at most every `min_interval_s` (a redraw per item would flicker)."""

    def __init__(self, stream=None, min_interval_s: float = 0.2, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.min_interval_s, self.clock = min_interval_s, clock
        self._last = float("-inf")
        self._width = 0

    def update(self, snapshot: ProgressSnapshot, final: bool = False) -> None:
        now = self.clock()
        if not final and now - self._last < self.min_interval_s:
            return
        self._last = now
        text = snapshot.describe()
        # Pad over the previous, longer line; a newline at the end hands the terminal back.
        self.stream.write("\r" + text.ljust(self._width) + ("\n" if final else ""))
        self.stream.flush()
        self._width = len(text)


class LogSink:
    """A `progress` JSON event every `every_s` seconds or `every_items` items, whichever comes first, and at the end.

    Each event carries the item fields that apply beside `event` (PROGRESS_KEYS:
    `platform`, `partition`, `run_id`, `step`, null where none does), so
    `jq 'select(.platform=="weibo")'` finds a platform's progress with its items;
    the platform is the sink's, else the correlation's, else the partition's
    source. `log_lag_ms`: the largest log lag (event time to line written,
    logging.LOG_LAG) of this process since the previous progress event.
    """

    def __init__(self, *, every_s: float = 5.0, every_items: int = 100, stage: str | None = None,
                 logger: logging.Logger = PROGRESS_LOG, clock: Callable[[], float] = time.monotonic,
                 platform: str | None = None) -> None:
        self.every_s, self.every_items, self.stage, self.platform = every_s, every_items, stage, platform
        self.logger, self.clock = logger, clock
        self._last_time = clock()
        self._last_done = 0

    def update(self, snapshot: ProgressSnapshot, final: bool = False) -> None:
        now = self.clock()
        due = now - self._last_time >= self.every_s or snapshot.done - self._last_done >= self.every_items
        if not (due or final):
            return
        self._last_time, self._last_done = now, snapshot.done
        ids = current_correlation()
        platform = self.platform or ids.get("platform") or platform_of_partition(ids.get("partition"))
        lag = LOG_LAG.take()
        fields = {**ids, "event": "progress", "stage": self.stage or snapshot.label, "platform": platform,
                  "final": final, **snapshot.as_fields(), "log_lag_ms": lag["max_ms"] if lag else None}
        self.logger.info(f"{snapshot.label} progress: {snapshot.describe()}", extra=fields)


def platform_of_partition(partition: str | None) -> str | None:
    """The platform of a partition key 'day|source_key' (source keys begin with their platform)."""
    if not partition:
        return None
    platform = str(partition).split("|")[-1].split("-", 1)[0]
    return platform if platform in platform_names() else None


def is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or not a real file
        return False


def default_sinks(*, log: bool = False, stream=None, stage: str | None = None) -> list[ProgressSink]:
    """A terminal line when stderr is a terminal, plus periodic log events when `log`."""
    stream = stream if stream is not None else sys.stderr
    sinks: list[ProgressSink] = [TerminalSink(stream)] if is_terminal(stream) else []
    if log:
        sinks.append(LogSink(stage=stage))
    return sinks


def human_bytes(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(count) < 1000 or unit == "TB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    raise AssertionError("unreachable")


def clock_text(seconds: float) -> str:
    """`0:23`, `12:05`, `3:02:11`."""
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"

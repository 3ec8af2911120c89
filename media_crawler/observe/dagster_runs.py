"""Dagster's share of the waiting, read from its run storage.

- Queued runs: runs created and not yet dequeued (QUEUED, NOT_STARTED), per
  platform, with the age of the oldest; the partitions they are for turn
  those partitions' ready items from `awaiting_run` into `run_queued`, and
  partitions with a run in flight into `step_pending` (ledger_stats.refine_with_runs).
- Run queue delay: created -> started (the run record's create_timestamp and
  start_time): how long the run coordinator held the run.
- Step start delay: a step's STEP_START after the event that let it start
  (RUN_START, or the latest STEP_SUCCESS before it: the assets are one chain),
  so a concurrency pool, a busy executor or a slow step process shows up.

Dagster is imported only when this module is used (1.4 s of imports): `status`
and `metrics` use it when DAGSTER_HOME names an instance, and say so when not.
Labels stay bounded: the platform (from the run's tags) and the stage the step
is (fetch, download, verify, commit).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from media_crawler.models import PLATFORMS
from media_crawler.observe.ledger_stats import DELAY_BUCKETS, DELAY_WINDOW_S, _round, percentile

PLATFORM_TAG = "media_crawler/platform"  # deploy/workers.py
PARTITION_TAG = "dagster/partition"  # 'day|source_key'
SOURCE_TAG = "media_crawler/source"  # runs of `media-crawler crawl`
STEP_STAGES = {"media_records": "fetch", "media_downloads": "download", "verified_media": "verify",
               "committed_media": "commit"}
RUN_SAMPLE_LIMIT = 500  # runs per look at the run queue delay
STEP_SAMPLE_RUNS = 50  # runs whose events are read for the step start delay (one query each)
UPDATE_MARGIN_S = 5.0  # run records updated this close to the last look are looked at again


def instance_from_environment():
    """The DagsterInstance DAGSTER_HOME names, or None (with the reason) when it names none."""
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        return None, "DAGSTER_HOME is not set"
    if not Path(home).is_dir():
        return None, f"DAGSTER_HOME {home} does not exist"
    from dagster import DagsterInstance

    return DagsterInstance.get(), None


def run_platform(tags: dict[str, str]) -> str:
    """The platform a run crawls, from its tags; 'other' when it names none we know (labels stay bounded)."""
    platform = tags.get(PLATFORM_TAG)
    if not platform:
        source = tags.get(SOURCE_TAG) or (tags.get(PARTITION_TAG) or "").split("|")[-1]
        platform = source.split("-", 1)[0]
    return platform if platform in PLATFORMS else "other"


def _epoch(value: datetime | float | None) -> float | None:
    if value is None or isinstance(value, (int, float)):
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.timestamp()


@dataclass
class RunsInFlight:
    queued: dict[str, dict[str, Any]] = field(default_factory=dict)  # platform -> {count, oldest_since}
    queued_partitions: set[str] = field(default_factory=set)
    running_partitions: set[str] = field(default_factory=set)
    running: dict[str, int] = field(default_factory=dict)  # platform -> runs starting or started


def runs_in_flight(instance) -> RunsInFlight:
    from dagster import DagsterRunStatus, RunsFilter

    view = RunsInFlight()
    waiting = (DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED)
    records = instance.get_run_records(RunsFilter(statuses=[*waiting, DagsterRunStatus.STARTING,
                                                            DagsterRunStatus.STARTED]))
    for record in records:
        run = record.dagster_run
        platform = run_platform(run.tags)
        partition = run.tags.get(PARTITION_TAG)
        if run.status in waiting:
            entry = view.queued.setdefault(platform, {"count": 0, "oldest_since": _epoch(record.create_timestamp)})
            entry["count"] += 1
            entry["oldest_since"] = min(entry["oldest_since"], _epoch(record.create_timestamp))
            if partition:
                view.queued_partitions.add(partition)
        else:
            view.running[platform] = view.running.get(platform, 0) + 1
            if partition:
                view.running_partitions.add(partition)
    return view


def queue_delay(record) -> float | None:
    """Created -> started, seconds (None for a run that never started)."""
    started, created = record.start_time, _epoch(record.create_timestamp)
    if started is None or created is None:
        return None
    return max(float(started) - created, 0.0)


def step_start_delays(instance, run_id: str) -> list[tuple[str, float]]:
    """(stage, seconds from the event that let the step start to its STEP_START) for one run."""
    from dagster import DagsterEventType

    kinds = {DagsterEventType.RUN_START, DagsterEventType.STEP_START, DagsterEventType.STEP_SUCCESS}
    ready: float | None = None
    delays = []
    for record in instance.get_records_for_run(run_id, of_type=kinds).records:
        entry = record.event_log_entry
        kind = entry.dagster_event_type
        if kind in (DagsterEventType.RUN_START, DagsterEventType.STEP_SUCCESS):
            ready = entry.timestamp if ready is None else max(ready, entry.timestamp)
        elif ready is not None:
            stage = STEP_STAGES.get(entry.step_key or "", "other")
            delays.append((stage, max(entry.timestamp - ready, 0.0)))
    return delays


def _stats(values: list[float]) -> dict[str, Any]:
    values = sorted(values)
    return {"count": len(values), "p50": _round(percentile(values, 50)), "p95": _round(percentile(values, 95)),
            "max": _round(values[-1] if values else None)}


def dagster_status(instance, now: float, view: RunsInFlight | None = None,
                   window_s: float = DELAY_WINDOW_S) -> dict[str, Any]:
    """What `status` shows beside the ledger's waits: queued runs, and the run queue and
    step start delays of the runs created in the window (the latest RUN_SAMPLE_LIMIT;
    steps of the latest STEP_SAMPLE_RUNS finished ones)."""
    from dagster import DagsterRunStatus, RunsFilter

    view = runs_in_flight(instance) if view is None else view
    created_after = datetime.fromtimestamp(now - window_s, tz=timezone.utc)
    records = instance.get_run_records(RunsFilter(created_after=created_after), limit=RUN_SAMPLE_LIMIT)
    by_platform: dict[str, list[float]] = {}
    for record in records:
        delay = queue_delay(record)
        if delay is not None:
            by_platform.setdefault(run_platform(record.dagster_run.tags), []).append(delay)
    finished = [record for record in records if record.dagster_run.status in
                (DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED)]
    steps: dict[str, list[float]] = {}
    for record in finished[:STEP_SAMPLE_RUNS]:
        for stage, delay in step_start_delays(instance, record.dagster_run.run_id):
            steps.setdefault(stage, []).append(delay)
    all_delays = [delay for values in by_platform.values() for delay in values]
    return {
        "available": True,
        "runs_queued": {platform: {"count": entry["count"], "oldest_age_s": round(now - entry["oldest_since"], 1)}
                        for platform, entry in sorted(view.queued.items())},
        "runs_in_flight": dict(sorted(view.running.items())),
        "run_queue_delay_s": {**_stats(all_delays),
                              "by_platform": {p: _stats(v) for p, v in sorted(by_platform.items())}},
        "step_start_delay_s": {stage: _stats(steps[stage]) for stage in
                               [*STEP_STAGES.values(), "other"] if stage in steps},
        "runs_sampled": len(records), "window_s": window_s,
    }


class Histogram:
    """A cumulative histogram with DELAY_BUCKETS, kept in process (prometheus text is built from it)."""

    def __init__(self, buckets: tuple[float, ...] = DELAY_BUCKETS) -> None:
        self.bounds = buckets
        self.buckets = [0] * len(buckets)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.sum += value
        self.count += 1
        for index, bound in enumerate(self.bounds):
            if value <= bound:
                self.buckets[index] += 1


class RunDelayHistograms:
    """The metrics exporter's Dagster histograms: run queue delay per platform, step start
    delay per stage. Fed by the runs updated since the previous scrape (each run counted
    once: its queue delay once it started, its steps once it finished); the first scrape
    takes the runs of the last `backfill_s`. Counts start again when the exporter
    restarts, as any Prometheus counter may."""

    def __init__(self, instance, backfill_s: float = DELAY_WINDOW_S, clock: Callable[[], float] = time.time) -> None:
        self.instance, self.backfill_s, self.clock = instance, backfill_s, clock
        self.queue: dict[str, Histogram] = {}
        self.steps: dict[str, Histogram] = {}
        self._watermark: float | None = None
        self._queue_seen: set[str] = set()
        self._done: dict[str, float] = {}  # run id -> its update time, once its steps were counted

    def update(self, now: float | None = None) -> None:
        from dagster import DagsterRunStatus, RunsFilter

        now = self.clock() if now is None else now
        after = (self._watermark if self._watermark is not None else now - self.backfill_s) - UPDATE_MARGIN_S
        finished = (DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED)
        records = self.instance.get_run_records(
            RunsFilter(statuses=[DagsterRunStatus.STARTED, *finished],
                       updated_after=datetime.fromtimestamp(after, tz=timezone.utc)),
            limit=RUN_SAMPLE_LIMIT, order_by="update_timestamp", ascending=True)
        for record in records:
            run = record.dagster_run
            updated = _epoch(record.update_timestamp) or now
            if run.run_id in self._done:
                continue
            if run.run_id not in self._queue_seen:
                delay = queue_delay(record)
                if delay is not None:
                    self.queue.setdefault(run_platform(run.tags), Histogram()).observe(delay)
                    self._queue_seen.add(run.run_id)
            if run.status in finished:
                for stage, delay in step_start_delays(self.instance, run.run_id):
                    self.steps.setdefault(stage, Histogram()).observe(delay)
                self._queue_seen.discard(run.run_id)
                self._done[run.run_id] = updated
            self._watermark = max(self._watermark or 0.0, updated)
        if self._watermark is None:
            self._watermark = now - self.backfill_s
        horizon = self._watermark - 2 * UPDATE_MARGIN_S
        self._done = {run_id: at for run_id, at in self._done.items() if at >= horizon}

"""Dagster's share of the waiting, read from its run storage.

- Queued runs: runs created and not yet dequeued (QUEUED, NOT_STARTED), per
  platform, with the age of the oldest; the partitions they are for turn
  those partitions' ready items from `awaiting_run` into `run_queued`, and
  partitions with a run in flight into `step_pending` (wait_summary.refine_with_runs).
- Run queue delay: created -> started (the run record's create_timestamp and
  start_time): how long the run coordinator held the run.
- Step start delay: a step's STEP_START after the event that let it start
  (RUN_START, or the latest STEP_SUCCESS before it: the assets are one chain),
  so a concurrency pool, a busy executor or a slow step process shows up.

Dagster itself is not imported to read this (its imports and opening an instance
cost 1.2-2.5 s of every `status` and `metrics --once`): `instance_from_environment`
reads the storage DAGSTER_HOME/dagster.yaml names with SQL when it is one Dagster
ships as SQL tables (the default SQLite files under DAGSTER_HOME, `storage: sqlite`,
`storage: postgres`): SqlRunStorage (store/dagster_private.py, with the measured
reason), a few bounded reads of the `runs` and `event_logs` tables. Any other storage (a custom class, the legacy `run_storage`
keys) is read through DagsterInstance as before (ApiRunStorage); so is an
instance a caller passes in. Labels stay bounded: the platform (from the run's
tags) and the stage the step is (fetch, download, verify, commit).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from media_crawler.environment import environment_value
from media_crawler.platforms.registry import names as platform_names
from media_crawler.shards import PARTITION_TAG, RANGE_START_TAG, partitions_of_run
from media_crawler.store.dagster_private import STEP_EVENT_KINDS, RunRow, SqlRunStorage
from media_crawler.store.reports.delays import DELAY_BUCKETS, DELAY_WINDOW_S, _round, percentile

PLATFORM_TAG = "media_crawler/platform"  # deploy/workers.py
SOURCE_TAG = "media_crawler/source"  # runs of `media-crawler crawl`
STEP_STAGES = {"media_records": "fetch", "media_downloads": "download", "verified_media": "verify",
               "committed_media": "commit"}
RUN_SAMPLE_LIMIT = 500  # runs per look at the run queue delay
STEP_SAMPLE_RUNS = 50  # runs whose events are read for the step start delay (one query each)
UPDATE_MARGIN_S = 5.0  # run records updated this close to the last look are looked at again


# Run statuses as Dagster stores them (DagsterRunStatus values).
WAITING_STATUSES = ("QUEUED", "NOT_STARTED")
IN_FLIGHT_STATUSES = (*WAITING_STATUSES, "STARTING", "STARTED")
FINISHED_STATUSES = ("SUCCESS", "FAILURE", "CANCELED")


def instance_from_environment():
    """(run storage, None) for the Dagster home (dagster_home.py), or (None, the reason) when there is none.

    A SqlRunStorage when dagster.yaml names a storage Dagster keeps in SQL tables
    (or names none: the default SQLite files), else the DagsterInstance itself."""
    from media_crawler.dagster_home import dagster_home_origin, dagster_home_path

    home = dagster_home_path()  # the one resolution every command shares (dagster_home.py)
    if not home.is_dir():
        return None, f"no Dagster home at {home} ({dagster_home_origin()}): nothing crawled into it yet"
    storage = sql_run_storage_for_home(home)
    if storage is not None:
        return storage, None
    from dagster import DagsterInstance

    return DagsterInstance.from_config(str(home)), None


def sql_run_storage_for_home(home: Path) -> "SqlRunStorage | None":
    """The storage dagster.yaml in `home` names, when it is SQL tables this can read; else None."""
    config_path = home / "dagster.yaml"
    config: Any = {}
    if config_path.is_file():
        import yaml

        try:
            config = yaml.load(config_path.read_text(encoding="utf-8"),
                               Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
        except (OSError, yaml.YAMLError):
            return None
    if not isinstance(config, dict):
        return None
    if any(key in config for key in ("run_storage", "event_log_storage", "local_artifact_storage")):
        return None  # configurable classes: let Dagster resolve them
    storage = config.get("storage")
    if storage is None:
        return SqlRunStorage.sqlite(home)
    if not isinstance(storage, dict) or len(storage) != 1:
        return None
    (kind, settings), = storage.items()
    settings = settings or {}
    if kind == "sqlite" and isinstance(settings, dict):
        base = _string_source(settings.get("base_dir"))
        return SqlRunStorage.sqlite(Path(base)) if base else None
    if kind == "postgres" and isinstance(settings, dict):
        url = _postgres_url(settings)
        if url is None:
            return None
        from media_crawler.scrub import register_secret
        from media_crawler.store.database import normalize_url
        from media_crawler.store.urls import is_database_url, url_password

        if not is_database_url(url):
            return None  # Dagster would fail on it too
        register_secret(url_password(url))  # an error quoting the DSN is shown by `status`
        url = normalize_url(url)
        return SqlRunStorage(url, event_logs_url=url)
    return None


class ApiRunStorage:
    """The same reads through a DagsterInstance (any storage Dagster can open)."""

    def __init__(self, instance) -> None:
        self.instance = instance

    def runs(self, statuses: tuple[str, ...] | None = None, created_after: float | None = None,
             updated_after: float | None = None, limit: int | None = None, order_by: str = "id",
             ascending: bool = False) -> list[RunRow]:
        from dagster import DagsterRunStatus, RunsFilter

        filters = RunsFilter(
            statuses=[DagsterRunStatus(status) for status in statuses or ()],
            created_after=None if created_after is None else datetime.fromtimestamp(created_after, tz=timezone.utc),
            updated_after=None if updated_after is None else datetime.fromtimestamp(updated_after, tz=timezone.utc))
        records = self.instance.get_run_records(filters, limit=limit, order_by=None if order_by == "id" else order_by,
                                                ascending=ascending)
        return [RunRow(record.dagster_run.run_id, record.dagster_run.status.value, dict(record.dagster_run.tags),
                       _epoch(record.create_timestamp), _epoch(record.update_timestamp), record.start_time)
                for record in records]

    def step_events(self, run_ids: list[str]) -> dict[str, list[tuple[str, float, str | None]]]:
        from dagster import DagsterEventType

        kinds = {DagsterEventType(kind) for kind in STEP_EVENT_KINDS}
        result = {}
        for run_id in run_ids:
            result[run_id] = [(record.event_log_entry.dagster_event_type.value, record.event_log_entry.timestamp,
                               record.event_log_entry.step_key)
                              for record in self.instance.get_records_for_run(run_id, of_type=kinds).records]
        return result

    def dispose(self) -> None:
        self.instance.dispose()


def run_storage(instance) -> "SqlRunStorage | ApiRunStorage":
    """The reads of this module over `instance`: a SqlRunStorage as it is, a DagsterInstance wrapped."""
    return instance if isinstance(instance, (SqlRunStorage, ApiRunStorage)) else ApiRunStorage(instance)


def _string_source(value: Any) -> str | None:
    """A dagster.yaml StringSource: a string, or {env: NAME}."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and set(value) == {"env"}:
        return environment_value(str(value["env"]))
    return None


def _postgres_url(settings: dict) -> str | None:
    """dagster-postgres' pg_url_from_config: postgres_url, or postgres_db's parts."""
    if "postgres_url" in settings:
        return None if "postgres_db" in settings else _string_source(settings["postgres_url"])
    parts = settings.get("postgres_db")
    if not isinstance(parts, dict):
        return None
    from urllib.parse import quote, urlencode

    values = {key: value if key == "params" else str(value) if isinstance(value, int) else _string_source(value)
              for key, value in parts.items()}
    if not values.get("username") or any(value is None for key, value in values.items() if key != "params"):
        return None
    userinfo = quote(str(values["username"]))
    if values.get("password"):
        userinfo += f":{quote(str(values['password']))}"
    url = (f"{values.get('scheme') or 'postgresql'}://{userinfo}@{values.get('hostname', '')}:"
           f"{values.get('port', '5432')}/{values.get('db_name', '')}")
    if values.get("params"):
        url += f"?{urlencode(values['params'], quote_via=quote)}"
    return url


def run_platform(tags: dict[str, str]) -> str:
    """The platform a run crawls, from its tags; 'other' when it names none we know (labels stay bounded)."""
    platform = tags.get(PLATFORM_TAG)
    if not platform:
        # A run of one partition names it; a run of several (a range of one platform) its first.
        source = tags.get(SOURCE_TAG) or (tags.get(PARTITION_TAG) or tags.get(RANGE_START_TAG) or "").split("|")[-1]
        platform = source.split("-", 1)[0]
    return platform if platform in platform_names() else "other"


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
    """Runs queued, starting or started: one read of the run records in those statuses."""
    view = RunsInFlight()
    for run in run_storage(instance).runs(statuses=IN_FLIGHT_STATUSES):
        platform = run_platform(run.tags)
        partitions = partitions_of_run(run.tags)  # every partition of a ranged run is in flight
        if run.status in WAITING_STATUSES:
            entry = view.queued.setdefault(platform, {"count": 0, "oldest_since": run.create_timestamp})
            entry["count"] += 1
            entry["oldest_since"] = min(entry["oldest_since"], run.create_timestamp)
            view.queued_partitions.update(partitions)
        else:
            view.running[platform] = view.running.get(platform, 0) + 1
            view.running_partitions.update(partitions)
    return view


def queue_delay(record: RunRow) -> float | None:
    """Created -> started, seconds (None for a run that never started)."""
    started, created = record.start_time, record.create_timestamp
    if started is None or created is None:
        return None
    return max(float(started) - created, 0.0)


def step_start_delays(instance, run_id: str) -> list[tuple[str, float]]:
    """(stage, seconds from the event that let the step start to its STEP_START) for one run."""
    return _step_delays(run_storage(instance).step_events([run_id]).get(run_id, []))


def _step_delays(events: list[tuple[str, float, str | None]]) -> list[tuple[str, float]]:
    ready: float | None = None
    delays = []
    for kind, timestamp, step_key in events:
        if kind in ("PIPELINE_START", "STEP_SUCCESS"):
            ready = timestamp if ready is None else max(ready, timestamp)
        elif ready is not None:
            delays.append((STEP_STAGES.get(step_key or "", "other"), max(timestamp - ready, 0.0)))
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
    storage = run_storage(instance)
    view = runs_in_flight(storage) if view is None else view
    records = storage.runs(created_after=now - window_s, limit=RUN_SAMPLE_LIMIT)
    by_platform: dict[str, list[float]] = {}
    for record in records:
        delay = queue_delay(record)
        if delay is not None:
            by_platform.setdefault(run_platform(record.tags), []).append(delay)
    finished = [record.run_id for record in records if record.status in FINISHED_STATUSES][:STEP_SAMPLE_RUNS]
    steps: dict[str, list[float]] = {}
    events = storage.step_events(finished)
    for run_id in finished:
        for stage, delay in _step_delays(events.get(run_id, [])):
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
        self.storage = run_storage(instance)
        self.queue: dict[str, Histogram] = {}
        self.steps: dict[str, Histogram] = {}
        self._watermark: float | None = None
        self._queue_seen: set[str] = set()
        self._done: dict[str, float] = {}  # run id -> its update time, once its steps were counted

    def update(self, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        after = (self._watermark if self._watermark is not None else now - self.backfill_s) - UPDATE_MARGIN_S
        records = self.storage.runs(statuses=("STARTED", *FINISHED_STATUSES), updated_after=after,
                                    limit=RUN_SAMPLE_LIMIT, order_by="update_timestamp", ascending=True)
        events = self.storage.step_events([run.run_id for run in records
                                           if run.status in FINISHED_STATUSES and run.run_id not in self._done])
        for run in records:
            updated = run.update_timestamp or now
            if run.run_id in self._done:
                continue
            if run.run_id not in self._queue_seen:
                delay = queue_delay(run)
                if delay is not None:
                    self.queue.setdefault(run_platform(run.tags), Histogram()).observe(delay)
                    self._queue_seen.add(run.run_id)
            if run.status in FINISHED_STATUSES:
                for stage, delay in _step_delays(events.get(run.run_id, [])):
                    self.steps.setdefault(stage, Histogram()).observe(delay)
                self._queue_seen.discard(run.run_id)
                self._done[run.run_id] = updated
            self._watermark = max(self._watermark or 0.0, updated)
        if self._watermark is None:
            self._watermark = now - self.backfill_s
        horizon = self._watermark - 2 * UPDATE_MARGIN_S
        self._done = {run_id: at for run_id, at in self._done.items() if at >= horizon}

"""Dagster past its public API: the one module that imports `dagster._...` or reads Dagster's tables.

Everything else uses Dagster's public names (DagsterInstance.get_run_records,
RunsFilter, get_records_for_run, report_run_failed, ...). What is here has no
public equivalent in the pinned Dagster (pyproject.toml): a pin bump that moves
any of it fails media_crawler_tests/test_dagster_private.py, naming the
name that moved. A leaf of the store layer (docs/DESIGN.md): it imports nothing
of media_crawler; it lives in store/ because it reads SQL tables, and only the
store speaks SQL. Dagster is imported inside the functions that need it, never
at import time (see SqlRunStorage for why).

- The gRPC client a deploy pings until the code server has loaded its code
  (deploy/services.py).
- An in-process code location, whose sensors and schedules `restore` pauses
  and resumes by the selector ids the daemon reads (recovery/dispatch.py).
- The failure data that marks a run failed as unexpectedly terminated
  (recovery/runs.py).
- The module path Dagster prints before our Failure in a step error
  (observe/traces.py).
- The instance a run coordinator was loaded for (`_instance`, Dagster's own
  accessor for a ConfigurableClass, deploy/run_coordinator.py).
- SqlRunStorage: Dagster's `runs` and `event_logs` tables read with SQL
  (observe/dagster_runs.py), for the storages Dagster keeps as SQL tables (the
  default SQLite files under DAGSTER_HOME, `storage: sqlite`, `storage: postgres`).
"""
from __future__ import annotations

import json
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, NamedTuple

FAILURE_PREFIX = "dagster._core.definitions.events.Failure: "  # how Dagster names our Failure in a step error
STEP_EVENT_KINDS = ("PIPELINE_START", "STEP_START", "STEP_SUCCESS")  # RUN_START is stored as PIPELINE_START


class RunRow(NamedTuple):
    """What these reads use of a run record."""
    run_id: str
    status: str  # a DagsterRunStatus value
    tags: dict[str, str]
    create_timestamp: float | None
    update_timestamp: float | None
    start_time: float | None


def _naive_utc(value: datetime | None) -> float | None:
    return None if value is None else value.replace(tzinfo=timezone.utc).timestamp()


# --- private names ----------------------------------------------------------------

def grpc_client(host: str, port: int):
    """A client of a Dagster code server (`dagster api grpc`): ping() and list_repositories()."""
    from dagster._grpc.client import DagsterGrpcClient

    return DagsterGrpcClient(host=host, port=port)


@contextmanager
def in_process_code_location(instance, module_name: str, location_name: str, executable: str) -> Iterator[Any]:
    """The code location `module_name` loaded in this process, named as a workspace names it."""
    from dagster._core.remote_origin import InProcessCodeLocationOrigin
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

    origin = InProcessCodeLocationOrigin(
        loadable_target_origin=LoadableTargetOrigin(executable_path=executable, module_name=module_name),
        location_name=location_name)
    with origin.create_location(instance) as location:
        yield location


def unexpected_termination():
    """The job_failure_data of DagsterInstance.report_run_failed for a run whose process is gone."""
    from dagster._core.events import JobFailureData, RunFailureReason

    return JobFailureData(error=None, failure_reason=RunFailureReason.UNEXPECTED_TERMINATION)


def coordinator_instance(coordinator):
    """The DagsterInstance a run coordinator serves (MayHaveInstanceWeakref._instance: no public accessor)."""
    return coordinator._instance


# --- Dagster's tables -----------------------------------------------------------

class SqlRunStorage:
    """Dagster's run and event-log tables read with SQL (read only; no Dagster import).

    Why SQL and not DagsterInstance.get_run_records / get_records_for_run, which
    answer the same questions (observe/dagster_runs.ApiRunStorage uses them for
    any other storage): importing Dagster and opening the instance is most of
    the cost, not the query. Measured 2026-12-03 on Dagster 1.13.27, the default
    SQLite storage with 100,000 runs (200 in flight), a fresh process per read as
    `status` is, on the shared 2-core dev host, 3 rounds: import + open 4.7-5.7 s
    through Dagster against 0.7-1.0 s here (mostly the sqlalchemy import); the
    in-flight read 0.10-0.12 s against 0.08-0.10 s; the window read (created in
    the last 3 days, limit 500) 0.32-0.40 s against 0.14-0.22 s. With 2,000 runs:
    4.0-6.0 s against 0.4-1.0 s to open. `status` and `metrics --once` pay the
    opening on every call, so these reads stay SQL while Dagster offers no
    lighter public reader; any storage this cannot read goes through the API.

    runs_url: the database of the `runs` table; event_logs_url: the database of
    `event_logs` when it is one (PostgreSQL), else event_logs_dir holds one SQLite
    file per run (`<run_id>.db`, Dagster's default SqliteEventLogStorage). A SQLite
    file not created yet is an instance with no runs (nothing is created here)."""

    def __init__(self, runs_url: str, event_logs_url: str | None = None, event_logs_dir: Path | None = None,
                 runs_path: Path | None = None) -> None:
        from sqlalchemy import Column, DateTime, Float, Integer, MetaData, String, Table, Text

        self.runs_url, self.event_logs_url, self.event_logs_dir, self.runs_path = \
            runs_url, event_logs_url, event_logs_dir, runs_path
        metadata = MetaData()
        self.runs_table = Table("runs", metadata, Column("id", Integer), Column("run_id", String),
                                Column("status", String), Column("run_body", Text),
                                Column("create_timestamp", DateTime), Column("update_timestamp", DateTime),
                                Column("start_time", Float))
        self.events_table = Table("event_logs", metadata, Column("id", Integer), Column("run_id", String),
                                  Column("event", Text), Column("dagster_event_type", Text))
        self._engines: dict[str, Any] = {}

    @classmethod
    def sqlite(cls, base: Path) -> "SqlRunStorage":
        """Dagster's SQLite layout under `base` (DagsterSqliteStorage): history/runs.db, history/runs/<run_id>.db."""
        runs_path = base / "history" / "runs.db"
        return cls(f"sqlite:///{runs_path}", event_logs_dir=base / "history" / "runs", runs_path=runs_path)

    def _engine(self, url: str):
        engine = self._engines.get(url)
        if engine is None:
            from sqlalchemy import create_engine
            from sqlalchemy.pool import NullPool

            engine = self._engines[url] = create_engine(url, poolclass=NullPool)
        return engine

    def runs(self, statuses: tuple[str, ...] | None = None, created_after: float | None = None,
             updated_after: float | None = None, limit: int | None = None, order_by: str = "id",
             ascending: bool = False) -> list[RunRow]:
        """Run records as DagsterInstance.get_run_records filters and orders them (newest first by default)."""
        from sqlalchemy import select

        if self.runs_path is not None and not self.runs_path.is_file():
            return []
        R = self.runs_table
        query = select(R.c.run_id, R.c.status, R.c.run_body, R.c.create_timestamp, R.c.update_timestamp,
                       R.c.start_time)
        if statuses:
            query = query.where(R.c.status.in_(statuses))
        if created_after is not None:
            query = query.where(R.c.create_timestamp > datetime.fromtimestamp(created_after, tz=timezone.utc)
                                .replace(tzinfo=None))
        if updated_after is not None:
            query = query.where(R.c.update_timestamp > datetime.fromtimestamp(updated_after, tz=timezone.utc)
                                .replace(tzinfo=None))
        column = R.c[order_by]
        query = query.order_by(column.asc() if ascending else column.desc())
        if limit:
            query = query.limit(limit)
        with self._engine(self.runs_url).connect() as conn:
            rows = conn.execute(query).fetchall()
        return [RunRow(run_id, status, _run_tags(body), _naive_utc(created), _naive_utc(updated),
                       None if started is None else float(started))
                for run_id, status, body, created, updated, started in rows]

    def step_events(self, run_ids: list[str]) -> dict[str, list[tuple[str, float, str | None]]]:
        """run id -> [(event type, timestamp, step key)] of its RUN_START, STEP_START and STEP_SUCCESS, in order."""
        from sqlalchemy import select

        E = self.events_table
        query = select(E.c.run_id, E.c.dagster_event_type, E.c.event).where(
            E.c.dagster_event_type.in_(STEP_EVENT_KINDS))
        result: dict[str, list[tuple[str, float, str | None]]] = {run_id: [] for run_id in run_ids}
        if not run_ids:
            return result
        if self.event_logs_url is not None:
            # One read for every run (PostgreSQL: the run_id index bounds it).
            with self._engine(self.event_logs_url).connect() as conn:
                rows = conn.execute(query.where(E.c.run_id.in_(run_ids)).order_by(E.c.id)).fetchall()
        else:
            rows = []
            for run_id in run_ids:  # one SQLite file per run
                path = self.event_logs_dir / f"{run_id}.db"
                if not path.is_file():
                    continue
                engine = self._engine(f"sqlite:///{path}")
                try:
                    with engine.connect() as conn:
                        rows.extend(conn.execute(query.order_by(E.c.id)).fetchall())
                finally:
                    engine.dispose()
                    self._engines.pop(f"sqlite:///{path}", None)
        for run_id, kind, body in rows:
            entry = json.loads(body)
            result.setdefault(run_id, []).append((kind, float(entry["timestamp"]), entry.get("step_key")))
        return result

    def dispose(self) -> None:
        for engine in self._engines.values():
            engine.dispose()
        self._engines.clear()


def _run_tags(body: str | None) -> dict[str, str]:
    """The tags of a serialized DagsterRun (the run_body column), as DagsterRun.tags reads them."""
    if not body:
        return {}
    tags = json.loads(body).get("tags") or {}
    return {str(key): str(value) for key, value in tags.items()} if isinstance(tags, dict) else {}

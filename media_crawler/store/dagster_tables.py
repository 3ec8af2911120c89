"""Dagster's run and event-log tables, read with SQL (read only; Dagster is not imported).

What observe/dagster_runs.py reads of a run storage Dagster keeps in SQL tables:
the default SQLite files under DAGSTER_HOME, `storage: sqlite`, `storage: postgres`.
Importing Dagster and opening an instance would cost 1.2-2.5 s of every `status`.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

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


class SqlRunStorage:
    """Dagster's run and event-log tables read with SQL (read only; no Dagster import).

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

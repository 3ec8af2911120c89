"""Schema versions: a ledger made by an older version is brought up to date in place,
its rows kept, and the time-window queries of `failures`, `status` and `export` use
the indexes version 2 added instead of reading every row."""
from __future__ import annotations

import logging
import subprocess
import sys
import time

import pytest
from sqlalchemy import create_engine, create_mock_engine, event, inspect, select, text

from media_crawler.store import schema
from media_crawler.store.database import dispose_engines, get_engine, migrate
from media_crawler.store.ledger import Ledger
from media_crawler_tests.store.test_ledger import record

TIME_INDEXES = set(schema.INDEXES_SINCE[2])


def make_version_1_ledger(url: str) -> None:
    """The ledger as version 1 left it: its tables, without version 2's indexes."""
    engine = create_engine(url)
    with engine.begin() as conn:
        schema.schema_version.create(conn)
        schema.metadata.create_all(conn, tables=[schema.tasks, schema.cursors, schema.feed_errors, schema.rate_budget])
        for name in TIME_INDEXES:
            conn.execute(text(f"DROP INDEX {name}"))
        conn.execute(schema.schema_version.insert().values(version=1, applied_at=time.time()))
        conn.execute(schema.tasks.insert().values(
            platform="urls", item_id="old", variant="original", kind="image", source_key="s", day="2026-01-01",
            canonical_url="https://example.com/old.jpg", media_url="https://example.com/old.jpg",
            state="committed", attempts=1, committed_at=time.time()))
    engine.dispose()


def index_names(engine) -> set[str]:
    return {index["name"] for index in inspect(engine).get_indexes(schema.tasks.name)}


def test_a_version_1_ledger_gets_the_time_indexes_and_keeps_its_rows(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    make_version_1_ledger(url)
    engine = get_engine(url)
    assert not TIME_INDEXES & index_names(engine)

    assert migrate(engine) == schema.SCHEMA_VERSION
    assert TIME_INDEXES <= index_names(engine)
    with engine.connect() as conn:
        versions = conn.execute(select(schema.schema_version.c.version).order_by(schema.schema_version.c.version))
        assert [row[0] for row in versions] == list(range(1, schema.SCHEMA_VERSION + 1))
    assert [task.item_id for task in Ledger(url).tasks()] == ["old"]
    dispose_engines()


def test_a_new_ledger_starts_at_the_latest_version_with_every_index(tmp_path):
    url = f"sqlite:///{tmp_path / 'new.db'}"
    Ledger(url).record_discovered([record(1)], source_key="s", day="d")
    engine = get_engine(url)
    assert TIME_INDEXES <= index_names(engine)
    assert migrate(engine) == schema.SCHEMA_VERSION  # again: nothing to do
    dispose_engines()


def test_time_window_queries_use_the_indexes(tmp_path):
    url = f"sqlite:///{tmp_path / 'plan.db'}"
    Ledger(url).record_discovered([record(1)], source_key="s", day="d")
    with get_engine(url).connect() as conn:
        for column, index in (("failed_at", "ix_mc_tasks_failed_at"), ("committed_at", "ix_mc_tasks_committed_at")):
            plan = " ".join(str(row[-1]) for row in conn.exec_driver_sql(
                f"EXPLAIN QUERY PLAN SELECT id FROM mc_tasks WHERE {column} >= 0"))
            assert index in plan, plan
    dispose_engines()


class ScriptedCursor:
    """A cursor whose first answers are 'database is locked', as SQLite gives while another process checkpoints."""

    def __init__(self, mode: str, locked_times: int) -> None:
        self.mode, self.locked_times, self.statements = mode, locked_times, []

    def execute(self, statement: str):
        import sqlite3

        self.statements.append(statement)
        if self.locked_times:
            self.locked_times -= 1
            raise sqlite3.OperationalError("database is locked")
        if statement == "PRAGMA journal_mode=WAL":
            self.mode = "wal"
        return self

    def fetchone(self):
        return (self.mode,)


def test_wal_is_set_once_and_a_locked_answer_is_waited_out():
    from media_crawler.store.database import _use_wal

    already = ScriptedCursor("wal", locked_times=0)
    _use_wal(already)
    assert already.statements == ["PRAGMA journal_mode"]  # no mode change asked of a WAL database

    new = ScriptedCursor("delete", locked_times=2)
    _use_wal(new)
    assert new.mode == "wal" and new.statements[-1] == "PRAGMA journal_mode=WAL"


def test_the_unfinished_partitions_query_reads_only_unfinished_rows_on_an_unanalyzed_ledger(tmp_path):
    """Version 7's partial index: the sensor's query (every minute) is answered from the
    index of the unfinished rows alone, without reading the table, on a ledger whose rows are mostly finished and that
    was never ANALYZEd (the planner has no statistics to prefer it otherwise)."""
    from sqlalchemy.dialects import sqlite

    from media_crawler.store.reports.reads import unfinished_partition_counts, unfinished_partition_query

    url = f"sqlite:///{tmp_path / 'bloated.db'}"
    ledger = Ledger(url)
    ledger.record_discovered([record(n) for n in range(200)], source_key="s", day="2026-11-25")
    engine = get_engine(url)
    with engine.begin() as conn:
        conn.execute(schema.tasks.update().where(schema.tasks.c.id > 3).values(state="committed"))
        sql = str(unfinished_partition_query().compile(dialect=sqlite.dialect()))
        plan = " ".join(str(row[-1]) for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}"))
    assert "COVERING INDEX ix_mc_tasks_unfinished" in plan, plan
    assert unfinished_partition_counts(ledger) == [("s", "2026-11-25", 3)]
    dispose_engines()


# auto_explain (a module PostgreSQL ships) logs the plan of every statement a session runs,
# as it ran; client_min_messages sends that log line to the client, and SQLAlchemy's psycopg2
# dialect logs what the server sent: the plan of the very query unfinished_partition_counts
# sends, in its own transaction.
_AUTO_EXPLAIN = ("LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; "
                 "SET auto_explain.log_analyze = on; SET client_min_messages = log")


def _log_every_plan(engine) -> None:
    import psycopg2

    @event.listens_for(engine, "connect")
    def _load(dbapi_conn, _record):  # noqa: ANN001
        cursor = dbapi_conn.cursor()
        try:
            cursor.execute(_AUTO_EXPLAIN)
        except psycopg2.Error as error:
            pytest.skip(f"PostgreSQL's auto_explain cannot be loaded here: {error}")
        dbapi_conn.commit()  # session settings, outside a transaction the pool would roll back


def test_on_postgresql_the_unfinished_partitions_query_never_bitmap_scans_a_bloated_unanalyzed_ledger(
        postgres, caplog):
    """Without statistics the planner guessed 3 % of the rows unfinished and read them by a
    bitmap scan of a state-led index, which visits in the table every dead row version
    that index still holds (one per move of each row through its states, until VACUUM):
    every sensor tick re-read them all (bench/unfinished_query.py: 0.6-1.3 s at 137,590
    rows). An index scan marks the dead entries it meets, so the next ticks skip them."""
    from media_crawler.store.reports.reads import unfinished_partition_counts

    url = postgres.create()
    engine = get_engine(url)
    _log_every_plan(engine)
    ledger = Ledger(url)
    with engine.begin() as conn:  # as in the minutes after a crawl: neither vacuumed nor analyzed
        conn.exec_driver_sql("ALTER TABLE mc_tasks SET (autovacuum_enabled = off)")
    ledger.record_discovered([record(n) for n in range(1500)], source_key="s", day="2026-11-25")
    ledger.record_discovered([record(n) for n in range(1500, 2000)], source_key="t", day="2026-11-24")
    tasks = schema.tasks
    for state in ("downloading", "downloaded", "verified"):  # every row through its states, as a crawl moves it
        with engine.begin() as conn:
            conn.execute(tasks.update().values(state=state))
    with engine.begin() as conn:
        conn.execute(tasks.update().where(tasks.c.item_id.not_in([f"id{n}" for n in range(0, 2000, 100)]))
                     .values(state="committed"))
        analyzed = conn.exec_driver_sql(
            "SELECT coalesce(last_analyze, last_autoanalyze) FROM pg_stat_user_tables WHERE relname = 'mc_tasks'"
        ).scalar()
    assert analyzed is None, "the ledger's statistics must say nothing"

    caplog.set_level(logging.INFO, logger="sqlalchemy.dialects.postgresql")
    counts = unfinished_partition_counts(ledger)
    plan = " ".join(message for message in caplog.messages if "GROUP BY" in message)
    assert "Index Scan" in plan or "Index Only Scan" in plan, plan
    assert "Bitmap" not in plan and "Seq Scan" not in plan, plan
    assert counts == [("t", "2026-11-24", 5), ("s", "2026-11-25", 15)]
    dispose_engines()


def ledger_before(tmp_path, version: int, *undone: str):
    """A one-row SQLite ledger as version-1 left it: made now, what `version` added undone
    (`undone`: SQL), the versions from it on forgotten. Returns (url, engine)."""
    url = f"sqlite:///{tmp_path / f'v{version - 1}.db'}"
    Ledger(url).record_discovered([record(1)], source_key="s", day="d")
    engine = get_engine(url)
    with engine.begin() as conn:
        for sql in undone:
            conn.exec_driver_sql(sql)
        conn.execute(schema.schema_version.delete().where(schema.schema_version.c.version >= version))
    return url, engine


def test_a_version_6_ledger_gets_the_unfinished_index_and_keeps_its_rows(tmp_path):
    url, engine = ledger_before(tmp_path, 7, "DROP INDEX ix_mc_tasks_unfinished")
    assert "ix_mc_tasks_unfinished" not in index_names(engine)
    assert migrate(engine) == schema.SCHEMA_VERSION >= 7
    assert "ix_mc_tasks_unfinished" in index_names(engine)
    assert [task.item_id for task in Ledger(url).tasks()] == [record(1).item_id]
    dispose_engines()


def test_a_version_7_ledger_gets_the_kept_answers_table_and_the_media_response_column(tmp_path):
    url, engine = ledger_before(tmp_path, 8, "DROP TABLE mc_api_answers",
                                "ALTER TABLE mc_tasks DROP COLUMN media_response")
    assert migrate(engine) == schema.SCHEMA_VERSION >= 8
    inspector = inspect(engine)
    assert "mc_api_answers" in inspector.get_table_names()
    assert "media_response" in {column["name"] for column in inspector.get_columns("mc_tasks")}
    assert [task.item_id for task in Ledger(url).tasks()] == [record(1).item_id]
    dispose_engines()


def test_a_version_8_ledger_gets_the_answer_release_marks(tmp_path):
    """Version 9 (answer release marks): a new table whose ids never come back, even once
    every row is pruned (a keeper compares them: store/answers.py)."""
    url, engine = ledger_before(tmp_path, 9, "DROP TABLE mc_answer_releases")
    assert migrate(engine) == schema.SCHEMA_VERSION >= 9
    assert "mc_answer_releases" in inspect(engine).get_table_names()
    marks = schema.answer_releases
    with engine.begin() as conn:
        conn.execute(marks.insert().values(sha256="a" * 64, pending=0, marked_at=0.0))
        conn.execute(marks.delete())
        conn.execute(marks.insert().values(sha256="a" * 64, pending=0, marked_at=0.0))
        assert [row.id for row in conn.execute(marks.select())] == [2]
    assert [task.item_id for task in Ledger(url).tasks()] == [record(1).item_id]
    dispose_engines()


def test_the_partial_indexes_get_their_predicate_on_both_databases(tmp_path):
    """The predicates are given as an index is created (schema.PARTIAL_INDEXES), so a SQLite
    ledger opens without SQLAlchemy's PostgreSQL dialect (issue 31's start-up) and each
    database still gets its WHERE."""
    url = f"sqlite:///{tmp_path / 'partial.db'}"
    opened = subprocess.run([sys.executable, "-c", (
        "import sys\nfrom media_crawler.store.ledger import Ledger\n"
        f"Ledger({url!r})\n"
        "print(sorted(name for name in sys.modules if name.startswith('sqlalchemy.dialects.postgresql')))")],
        capture_output=True, text=True, timeout=120)
    assert opened.returncode == 0, opened.stderr
    assert opened.stdout.strip() == "[]"
    with create_engine(url).connect() as conn:
        made = dict(conn.exec_driver_sql("SELECT name, sql FROM sqlite_master WHERE type = 'index'").all())
    statements: list[str] = []
    postgresql = create_mock_engine("postgresql://", lambda ddl, *args, **kw: statements.append(
        str(ddl.compile(dialect=postgresql.dialect))))
    schema.metadata.create_all(postgresql, checkfirst=False)
    for name, predicate in schema.PARTIAL_INDEXES.items():
        assert made[name].endswith(f"WHERE {predicate}")
        [created] = [sql for sql in statements if f"INDEX {name} " in sql]
        assert created.strip().endswith(f"WHERE {predicate}")


def test_a_new_ledger_made_at_once_has_the_schema_the_steps_make(tmp_path):
    """A new ledger is created at the latest version in one go (database._create_latest):
    the same tables, columns and indexes as version 1 brought up step by step."""
    from media_crawler.store.database import MIGRATIONS

    stepped = create_engine(f"sqlite:///{tmp_path / 'stepped.db'}")
    with stepped.begin() as conn:
        schema.schema_version.create(conn)
        for version in range(1, schema.SCHEMA_VERSION + 1):
            MIGRATIONS[version](conn)
    at_once = get_engine(f"sqlite:///{tmp_path / 'at_once.db'}")
    assert migrate(at_once) == schema.SCHEMA_VERSION

    def described(engine) -> set:
        with engine.connect() as conn:
            return set(conn.exec_driver_sql("SELECT type, name, tbl_name, sql FROM sqlite_master").all())

    assert described(at_once) == described(stepped)
    with at_once.connect() as conn:
        versions = conn.execute(select(schema.schema_version.c.version).order_by(schema.schema_version.c.version))
        assert [row[0] for row in versions] == list(range(1, schema.SCHEMA_VERSION + 1))
    stepped.dispose()
    dispose_engines()

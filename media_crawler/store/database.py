"""Engines for the ledger database, and its versioned migrations.

SQLite (the embedded default) gets WAL and a busy timeout so several worker
processes can share one file; PostgreSQL needs nothing special. Both run the
same Core statements.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Callable, Iterable

from sqlalchemy import ColumnElement, Engine, Index, Table, create_engine, event, exc, func, inspect, select
from sqlalchemy.engine import Connection

from media_crawler.store import schema

_ENGINES: dict[str, Engine] = {}
_LOCK = threading.Lock()


def normalize_url(url: str) -> str:
    # SQLAlchemy 2.1 reads plain postgresql:// as psycopg 3, which is not installed.
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg2://" + url.split("://", 1)[1]
    return url


def get_engine(url: str) -> Engine:
    """One engine per URL per process (engines own connection pools)."""
    url = normalize_url(url)
    with _LOCK:
        engine = _ENGINES.get(url)
        if engine is None:
            engine = _create(url)
            _ENGINES[url] = engine
        return engine


def _forget_engines_in_child() -> None:
    """A forked child must not touch its parent's connections (SQLAlchemy's fork
    recipe): drop the pools without closing them; the child connects anew."""
    global _LOCK
    _LOCK = threading.Lock()
    for engine in _ENGINES.values():
        engine.dispose(close=False)
    _ENGINES.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_engines_in_child)


def dispose_engines() -> None:
    with _LOCK:
        for engine in _ENGINES.values():
            engine.dispose()
        _ENGINES.clear()


def _use_wal(cursor, timeout_s: float = 30.0) -> None:
    """Put the database in WAL mode, which it keeps in its file once set.

    Asking for WAL when the file already is in WAL is still a journal-mode
    change request, and SQLite can answer it "database is locked" at once,
    without waiting out busy_timeout, while another process writes (seen as a
    crawl failing at connect when two start together). So the mode is read
    first, and only a database not yet in WAL (a new one) is switched, retrying
    while another process holds the lock.
    """
    import sqlite3

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if cursor.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


# WAL pages after which a commit copies them into the database (SQLite's default: 1,000).
# A page that many batches rewrite (an index leaf, a table page of rows in flight) is
# copied once per checkpoint however often it changed since: at 1,000, fetch-urls over
# 5,000 small files copied ~9,600 pages (as many reads), a page rewritten every few
# batches copied again and again. The WAL file grows to 16 MiB (4,000 pages) between
# checkpoints, and a reader finds a page in it through the wal-index as fast. What a
# killed process leaves is the same (every commit is in the WAL); a power cut may take
# back more of the last batches (synchronous=NORMAL syncs the WAL at a checkpoint),
# which a re-run redoes, as before: their blobs were made durable before their rows.
WAL_CHECKPOINT_PAGES = 4000


def _create(url: str) -> Engine:
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record):  # noqa: ANN001
            # WAL: readers do not block the writer; NORMAL sync is durable in WAL mode
            # except for the last transactions on power loss, which a re-run redoes.
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA busy_timeout=30000")
            _use_wal(cursor)
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
            cursor.close()
            # Let SQLAlchemy's BEGIN reach SQLite so transactions really start.
            dbapi_conn.isolation_level = None

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn):  # noqa: ANN001
            # IMMEDIATE takes the write lock up front: two claimers never both
            # read the same free rows and then race to update them.
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    engine = create_engine(url, pool_size=10, max_overflow=10)
    _ping_when_idle(engine)
    return engine


# A pooled connection handed back less than this long ago was working then. Pinging
# every checkout (pool_pre_ping) cost a round trip per ledger call, 7 % of a crawl
# thread's time on PostgreSQL; a connection idle longer may have outlived a server
# restart or an idle timeout, so it is pinged first and replaced if dead.
IDLE_PING_S = 10.0


def _ping_when_idle(engine: Engine) -> None:
    @event.listens_for(engine, "checkin")
    def _checked_in(_dbapi_conn, record):  # noqa: ANN001
        record.info["checked_in_at"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checked_out(dbapi_conn, record, _proxy):  # noqa: ANN001
        checked_in_at = record.info.get("checked_in_at")
        if checked_in_at is None or time.monotonic() - checked_in_at < IDLE_PING_S:
            return  # new, or in use a moment ago
        try:
            engine.dialect.do_ping(dbapi_conn)
        except Exception:  # any failure means this connection is unusable
            # The pool discards this connection and hands out a fresh one (PoolEvents.checkout).
            raise exc.DisconnectionError("idle ledger connection failed its ping") from None


def lock_rows_in_id_order(conn: Connection, table: Table, *where: ColumnElement[bool]) -> None:
    """PostgreSQL: take the row locks a multi-row write will need, up front, in id order.

    Two transactions updating overlapping rows in different orders deadlock (a
    download batch lands in completion order while a discovery of another day
    refreshes the same undated rows in feed order, or a heartbeat scans them in
    heap order). Locking in one global order first makes the second writer wait
    for the first instead. SQLite needs nothing: BEGIN IMMEDIATE admits one
    writer at a time.
    """
    if conn.dialect.name != "postgresql":
        return
    conn.execute(select(table.c.id).where(*where).order_by(table.c.id).with_for_update())


def lock_ids_in_order(conn: Connection, table: Table, ids: Iterable[int]) -> None:
    """`lock_rows_in_id_order` for rows known by id (nothing to do for none)."""
    if conn.dialect.name != "postgresql":
        return  # nothing to lock (above): not even the IN list to build, at every ledger batch
    wanted = sorted(set(ids))
    if wanted:
        lock_rows_in_id_order(conn, table, table.c.id.in_(wanted))


# Each step upgrades the schema from version N-1 to N. Version 1 creates the tables.
def _v1_create(conn: Connection) -> None:
    schema.metadata.create_all(conn, tables=[schema.tasks, schema.cursors, schema.feed_errors, schema.rate_budget])


def _indexes_added(after: int, upto: int = schema.SCHEMA_VERSION) -> list[Index]:
    """The mc_tasks indexes that versions after..upto added (schema.INDEXES_SINCE)."""
    names = {name for version, added in schema.INDEXES_SINCE.items() if after < version <= upto for name in added}
    return [index for index in schema.tasks.indexes if index.name in names]


def _v2_time_indexes(conn: Connection) -> None:
    # A ledger created at version 2 already has them (create_all makes every index
    # of the table definition), and on PostgreSQL an upgrade built them before this
    # transaction (_build_new_indexes_concurrently): checkfirst makes this a no-op there.
    for index in _indexes_added(after=1, upto=2):
        index.create(conn, checkfirst=True)


def _v3_wait_columns(conn: Connection) -> None:
    # Why an unfinished row waits (store/waits.py). A ledger created at version 3
    # has them already (create_all), hence the look first. Nullable columns without a
    # default: PostgreSQL and SQLite add them to the catalog without rewriting a row,
    # so a large ledger is upgraded at once (PostgreSQL holds the table's lock only
    # for that moment, after the writes in flight).
    _add_missing_columns(conn, schema.tasks, schema.COLUMNS_SINCE[3])


def _add_missing_columns(conn: Connection, table: Table, names: Iterable[str]) -> None:
    """ALTER TABLE ADD COLUMN for each of `names` the table does not have yet (a table
    created at the new version has them already: create_all made them)."""
    present = {column["name"] for column in inspect(conn).get_columns(table.name)}
    for name in names:
        if name not in present:
            kind = table.c[name].type.compile(dialect=conn.dialect)
            conn.exec_driver_sql(f'ALTER TABLE "{table.name}" ADD COLUMN "{name}" {kind}')


def _v4_partition_layout(conn: Connection) -> None:
    # Tables for the shard layout and per-source state (schema.TABLES_SINCE). A ledger
    # upgraded to 4 with rows was made with one partition per source: it gets a
    # marker row instead of a layout (pipeline/layout.py refuses it until upgraded).
    tables = [schema.metadata.tables[name] for name in schema.TABLES_SINCE[4]]
    schema.metadata.create_all(conn, tables=tables, checkfirst=True)
    for index in _indexes_added(after=3, upto=4):  # built concurrently before this on PostgreSQL
        index.create(conn, checkfirst=True)
    if conn.execute(select(schema.tasks.c.id).limit(1)).first() is not None:
        # Rows made under per-source partitions: mark the home, so nothing maps it to
        # shards before `media-crawler upgrade-home` has run (pipeline/layout.py).
        conn.execute(schema.layout.insert().values(platform=schema.LEGACY_LAYOUT, shards=0, recorded_at=time.time()))


def _v5_item_feed_errors(conn: Connection) -> None:
    # Item-level feed errors are recorded (mc_feed_errors.item_id): a nullable column
    # without default, a change of the catalog only, as in version 3.
    for table_name, name in schema.OTHER_COLUMNS_SINCE[5]:
        _add_missing_columns(conn, schema.metadata.tables[table_name], [name])


def _v6_lease_index(conn: Connection) -> None:
    # A partial index (leased rows only): built before this transaction on PostgreSQL.
    for index in _indexes_added(after=5, upto=6):
        index.create(conn, checkfirst=True)


def _v7_unfinished_index(conn: Connection) -> None:
    # A partial index (unfinished rows only): built before this transaction on PostgreSQL.
    for index in _indexes_added(after=6, upto=7):
        index.create(conn, checkfirst=True)


def _v8_archive(conn: Connection) -> None:
    # The API answers kept as fetched (a new table, with its indexes: empty, so built at
    # once on both databases) and the media response's headers (a nullable column, a
    # change of the catalog only, as in version 3).
    tables = [schema.metadata.tables[name] for name in schema.TABLES_SINCE[8]]
    schema.metadata.create_all(conn, tables=tables, checkfirst=True)
    _add_missing_columns(conn, schema.tasks, schema.COLUMNS_SINCE[8])


def _v9_answer_release_marks(conn: Connection) -> None:
    # The marks of answer blobs a compact releases (schema.answer_releases): a new, empty
    # table with its index, built at once on both databases.
    tables = [schema.metadata.tables[name] for name in schema.TABLES_SINCE[9]]
    schema.metadata.create_all(conn, tables=tables, checkfirst=True)


MIGRATIONS: dict[int, Callable[[Connection], None]] = {1: _v1_create, 2: _v2_time_indexes, 3: _v3_wait_columns,
                                                       4: _v4_partition_layout, 5: _v5_item_feed_errors,
                                                       6: _v6_lease_index, 7: _v7_unfinished_index,
                                                       8: _v8_archive, 9: _v9_answer_release_marks}


# Session-level advisory lock: one process at a time builds indexes concurrently.
_INDEX_BUILD_LOCK = 80412002


def _build_new_indexes_concurrently(engine: Engine) -> None:
    """PostgreSQL, upgrading a ledger that has rows: build the indexes later versions
    add with CREATE INDEX CONCURRENTLY, before the versioned transaction.

    A plain CREATE INDEX holds a lock that stops every INSERT and UPDATE of the
    table until the index is built, which on a large ledger stalls every running
    crawl for as long. CONCURRENTLY lets them write meanwhile, but cannot run in
    a transaction, so it runs here, outside; the version step then finds the
    index there (checkfirst) and only records the version. A build that died
    half way leaves an INVALID index behind: it is dropped and built again.
    """
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        if not inspect(conn).has_table(schema.schema_version.name):
            return  # a new ledger: version 1 creates every index on empty tables
        current = conn.execute(select(func.max(schema.schema_version.c.version))).scalar() or 0
        wanted = _indexes_added(after=current)
        if not wanted:
            return
        conn.exec_driver_sql(f"SELECT pg_advisory_lock({_INDEX_BUILD_LOCK})")
        try:
            for index in wanted:
                _build_concurrently(conn, index)
        finally:
            conn.exec_driver_sql(f"SELECT pg_advisory_unlock({_INDEX_BUILD_LOCK})")


def _build_concurrently(conn: Connection, index: Index) -> None:
    valid = conn.exec_driver_sql(
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE c.relname = %(name)s AND pg_table_is_visible(c.oid)", {"name": index.name}).scalar()
    if valid:
        return
    if valid is not None:  # INVALID: the leftover of a build that did not finish
        conn.exec_driver_sql(f'DROP INDEX CONCURRENTLY IF EXISTS "{index.name}"')
    columns = ", ".join(f'"{column.name}"' for column in index.columns)
    where = schema.PARTIAL_INDEXES.get(index.name)  # a partial index keeps its predicate
    predicate = f" WHERE {where}" if where is not None else ""
    conn.exec_driver_sql(
        f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{index.name}" ON "{index.table.name}" ({columns}){predicate}')


def _create_latest(conn: Connection) -> None:
    """A new ledger: every table and index as the latest version defines them, made at
    once, and every version recorded as applied. The steps one by one would make the same
    schema (store/test_migrations.py compares them), each looking first for what a step
    before had already made: 40 % of a new ledger's opening, which every fetch-urls into
    a fresh store paid (issue 31's start-up)."""
    schema.metadata.create_all(conn, tables=[table for table in schema.metadata.sorted_tables
                                             if table is not schema.schema_version])
    applied_at = time.time()
    conn.execute(schema.schema_version.insert(),
                 [{"version": version, "applied_at": applied_at} for version in range(1, schema.SCHEMA_VERSION + 1)])


def migrate(engine: Engine) -> int:
    """Bring the schema to SCHEMA_VERSION; returns the version now in force."""
    if engine.dialect.name == "postgresql":
        _build_new_indexes_concurrently(engine)
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            # Two workers starting at once must not both create the tables.
            conn.exec_driver_sql("SELECT pg_advisory_xact_lock(80412001)")
        schema.schema_version.create(conn, checkfirst=True)
        current = conn.execute(select(schema.schema_version.c.version).order_by(schema.schema_version.c.version.desc())).first()
        version = current[0] if current else 0
        if version == 0 and inspect(conn).has_table(schema.tasks.name):
            raise RuntimeError("ledger tables exist without a schema version; refusing to guess")
        if version == 0:
            _create_latest(conn)
            return schema.SCHEMA_VERSION
        for target in range(version + 1, schema.SCHEMA_VERSION + 1):
            MIGRATIONS[target](conn)
            conn.execute(schema.schema_version.insert().values(version=target, applied_at=time.time()))
        return max(version, schema.SCHEMA_VERSION)

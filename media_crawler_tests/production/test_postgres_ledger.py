"""The ledger on PostgreSQL: versioned migrations under concurrent start (new indexes built
concurrently, so crawls keep writing), SKIP LOCKED claims, racing discoveries."""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import create_engine, select, text

from media_crawler.models import Lease, MediaRecord
from media_crawler.store import schema
from media_crawler.store.database import dispose_engines, get_engine, migrate
from media_crawler.store.ledger import DISCOVERED, DOWNLOADING, Ledger
from media_crawler.store.leases import claim_downloads
from media_crawler_tests.ledger_columns import columns
from media_crawler_tests.store.test_migrations import make_version_1_ledger


def record(n: int) -> MediaRecord:
    return MediaRecord(platform="urls", item_id=f"id{n}", variant="file", kind="image",
                       canonical_url=f"https://example.org/{n}", media_url=f"https://cdn.example.org/{n}.jpg")


@pytest.fixture
def fresh_url(postgres) -> str:
    """A database of its own: these tests look at the schema from its very first migration."""
    yield postgres.create()
    dispose_engines()


def test_migrations_run_once_when_many_workers_start_together(fresh_url):
    engines = [create_engine(fresh_url) for _ in range(4)]  # separate pools: separate sessions
    barrier = threading.Barrier(len(engines))

    def start(engine):
        barrier.wait()
        return migrate(engine)

    try:
        with ThreadPoolExecutor(len(engines)) as pool:
            versions = list(pool.map(start, engines))
        assert versions == [schema.SCHEMA_VERSION] * len(engines)
        with engines[0].connect() as conn:
            applied = conn.execute(select(schema.schema_version.c.version)).scalars().all()
        assert applied == list(range(1, schema.SCHEMA_VERSION + 1)), "each migration step is recorded exactly once"
        assert migrate(engines[0]) == schema.SCHEMA_VERSION  # a restart migrates nothing
    finally:
        for engine in engines:
            engine.dispose()


def test_tables_without_a_schema_version_are_refused_not_recreated(fresh_url):
    engine = get_engine(fresh_url)
    migrate(engine)
    with engine.begin() as conn:
        conn.execute(text(f"DROP TABLE {schema.schema_version.name}"))
    with pytest.raises(RuntimeError, match="without a schema version"):
        migrate(engine)


def test_concurrent_claimers_share_the_rows_without_overlap(fresh_url):
    ledger = Ledger(fresh_url)
    ledger.record_discovered([record(n) for n in range(300)], source_key="s", day="d")
    claimed: dict[str, list[int]] = {}
    barrier = threading.Barrier(4)

    def claimer(owner: str) -> None:
        barrier.wait()
        mine = claimed.setdefault(owner, [])
        while batch := claim_downloads(ledger, source_key="s", day="d", lease=Lease(owner, 60), limit=7):
            mine.extend(task.id for task in batch)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(claimer, ["a", "b", "c", "d"]))
    every_claim = [task_id for ids in claimed.values() for task_id in ids]
    assert len(every_claim) == len(set(every_claim)) == 300, "a row was leased to two owners"
    owners = {task.id: task for task in ledger.tasks()}
    for owner, ids in claimed.items():
        assert all(owners[i].state == DOWNLOADING for i in ids)


def test_a_claim_skips_rows_another_transaction_holds_instead_of_waiting(fresh_url):
    ledger = Ledger(fresh_url)
    ledger.record_discovered([record(n) for n in range(10)], source_key="s", day="d")
    ids = [task.id for task in ledger.tasks()]
    holder = create_engine(fresh_url)
    try:
        with holder.connect() as conn, conn.begin():
            # Another worker is in the middle of claiming the first four rows.
            conn.execute(select(schema.tasks.c.id).where(schema.tasks.c.id.in_(ids[:4])).with_for_update())
            with ThreadPoolExecutor(1) as pool:
                claim = pool.submit(claim_downloads, ledger, source_key="s", day="d", lease=Lease("other", 60))
                # A claim that waited for the lock would time out here (and be released on rollback).
                got = claim.result(timeout=20)
            assert [task.id for task in got] == ids[4:]
        assert [task.id for task in claim_downloads(ledger, source_key="s", day="d", lease=Lease("late", 60))] == ids[:4]
    finally:
        holder.dispose()


def test_two_runs_discovering_the_same_records_at_once_insert_each_once(fresh_url):
    ledger = Ledger(fresh_url)
    records = [record(n) for n in range(200)]
    barrier = threading.Barrier(2)

    def discover(run_id: str):
        barrier.wait()
        return ledger.record_discovered(records, source_key="s", day="d", run_id=run_id)

    with ThreadPoolExecutor(2) as pool:
        summaries = list(pool.map(discover, ["run-a", "run-b"]))
    assert sum(summary.new for summary in summaries) == 200
    tasks = ledger.tasks()
    assert len(tasks) == 200 and {task.state for task in tasks} == {DISCOVERED}


def in_lockstep(*loops, rounds: int = 30, timeout: float = 60) -> None:
    """Run each loop body `rounds` times in its own thread, all starting each round together.
    The first error stops every thread (a broken barrier) and is raised here; a barrier that
    broke with no error behind it (a round that never finished: a deadlock or a hang) fails
    the test too, so a test using this cannot pass without running every round."""
    barrier = threading.Barrier(len(loops), timeout=timeout)

    def run(body) -> int:
        for n in range(rounds):
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                return n  # another thread failed, or the wait timed out: see below
            try:
                body(n)
            except BaseException:
                barrier.abort()
                raise
        return rounds

    with ThreadPoolExecutor(len(loops)) as pool:
        futures = [pool.submit(run, body) for body in loops]
        completed = [future.result() for future in futures]  # re-raises a body's error
    assert completed == [rounds] * len(loops), f"rounds completed per thread: {completed} of {rounds}"


def test_batches_touching_the_same_rows_in_opposite_orders_do_not_deadlock(fresh_url):
    # Two download batches over shared rows, landing in different completion orders.
    ledger = Ledger(fresh_url)
    ledger.record_discovered([record(n) for n in range(40)], source_key="s", day="d")
    ids = [task.id for task in ledger.tasks()]
    in_lockstep(lambda n: ledger.apply([(task_id, None, columns(attempts=n)) for task_id in ids]),
                lambda n: ledger.apply([(task_id, None, columns(attempts=n)) for task_id in reversed(ids)]))
    # Both threads wrote the last round's value to every row: no batch was lost to a rollback.
    assert sorted(task.attempts for task in ledger.tasks()) == [29] * 40


def test_discovery_and_a_download_batch_over_the_same_rows_do_not_deadlock(fresh_url):
    # A discovery of another day refreshes undated rows in feed order while a
    # download batch of the first day lands on them in completion order.
    ledger = Ledger(fresh_url)
    records = [record(n) for n in range(40)]
    ledger.record_discovered(records, source_key="s", day="d")
    ids = [task.id for task in ledger.tasks()]
    in_lockstep(lambda n: ledger.record_discovered(list(reversed(records)), source_key="s", day="d2"),
                lambda n: ledger.apply([(task_id, None, columns(attempts=n)) for task_id in ids]))
    tasks = ledger.tasks()
    # Rediscovery adds no row and does not undo the download batches' writes.
    assert len(tasks) == 40 and {task.attempts for task in tasks} == {29}


def test_a_barrier_that_times_out_fails_the_lockstep_instead_of_passing():
    # One body outlasts the barrier's timeout: both threads see a broken barrier and no error.
    with pytest.raises(AssertionError, match="rounds completed"):
        in_lockstep(lambda n: time.sleep(0.5), lambda n: None, rounds=2, timeout=0.1)


def _index_validity(engine) -> dict[str, bool]:
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_class t ON t.oid = i.indrelid WHERE t.relname = 'mc_tasks'").all()
    return dict(rows)


def test_upgrading_builds_new_indexes_while_crawls_keep_writing(fresh_url):
    """A plain CREATE INDEX would queue behind the open write and then hold every
    later writer until it is built; CONCURRENTLY lets the later writer through."""
    make_version_1_ledger(fresh_url)
    engine = create_engine(fresh_url)
    open_write = engine.connect()
    writer_during_build = create_engine(fresh_url)
    try:
        transaction = open_write.begin()  # a crawl mid-transaction when the upgrade starts
        open_write.execute(text("UPDATE mc_tasks SET attempts = attempts + 1"))
        upgrade = ThreadPoolExecutor(1).submit(migrate, create_engine(fresh_url))
        # Autocommit: inside one transaction pg_stat_activity answers from a cached snapshot.
        with writer_during_build.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            for _ in range(100):
                building = conn.execute(text(
                    "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'CREATE INDEX CONCURRENTLY%'")).scalar()
                if building:
                    break
                threading.Event().wait(0.05)
            assert building, "the upgrade should be building an index, waiting for the open write"
        with writer_during_build.begin() as conn:  # another crawl records new items meanwhile
            conn.exec_driver_sql("SET LOCAL lock_timeout = '3s'")
            conn.execute(schema.tasks.insert().values(
                platform="urls", item_id="new", variant="file", kind="image", source_key="s", day="2026-01-02",
                canonical_url="https://example.org/new", media_url="https://example.org/new.jpg",
                state=DISCOVERED, attempts=0))
        assert not upgrade.done()
        transaction.commit()
        assert upgrade.result(timeout=30) == schema.SCHEMA_VERSION
        validity = _index_validity(engine)
        assert all(validity[name] for name in schema.INDEXES_SINCE[2])
        with engine.connect() as conn:
            versions = conn.execute(select(schema.schema_version.c.version)).scalars().all()
        assert sorted(versions) == list(range(1, schema.SCHEMA_VERSION + 1))
    finally:
        open_write.close()
        writer_during_build.dispose()
        engine.dispose()


def test_an_invalid_index_left_by_a_dead_build_is_built_again(fresh_url):
    make_version_1_ledger(fresh_url)
    engine = create_engine(fresh_url)
    name = schema.INDEXES_SINCE[2][0]
    try:
        with engine.begin() as conn:  # what a build killed half way leaves: the index, marked INVALID
            conn.exec_driver_sql(f"CREATE INDEX {name} ON mc_tasks (failed_at)")
            conn.exec_driver_sql(
                f"UPDATE pg_index SET indisvalid = false WHERE indexrelid = '{name}'::regclass")
        assert _index_validity(engine)[name] is False
        assert migrate(engine) == schema.SCHEMA_VERSION
        assert all(_index_validity(engine)[index] for index in schema.INDEXES_SINCE[2])
    finally:
        engine.dispose()


def _backend_pid(ledger: Ledger) -> int:
    with ledger.engine.connect() as conn:
        return conn.execute(text("select pg_backend_pid()")).scalar_one()


def test_a_ledger_connection_in_steady_use_is_not_pinged(fresh_url, monkeypatch):
    """No round trip per ledger call: a connection handed back a moment ago is used as is."""
    ledger = Ledger(fresh_url)
    pings = []
    monkeypatch.setattr(ledger.engine.dialect, "do_ping", lambda conn: pings.append(conn) or True)
    for n in range(5):
        ledger.record_discovered([record(n)], source_key="s", day="2026-11-25")
        ledger.state_counts()
    assert pings == []


def test_an_idle_ledger_connection_killed_by_the_server_is_replaced(fresh_url, monkeypatch):
    """A pooled connection that sat idle past IDLE_PING_S is pinged; one the server
    closed meanwhile (a restart, an idle timeout) is replaced, and the call succeeds."""
    from media_crawler.store import database

    ledger = Ledger(fresh_url)
    ledger.record_discovered([record(1)], source_key="s", day="2026-11-25")
    dead_pid = _backend_pid(ledger)
    with create_engine(fresh_url).connect() as admin:
        assert admin.execute(text("select pg_terminate_backend(:pid)"), {"pid": dead_pid}).scalar_one()
    monkeypatch.setattr(database, "IDLE_PING_S", 0.0)  # every pooled connection now counts as idle

    assert ledger.state_counts() == {DISCOVERED: 1}
    assert _backend_pid(ledger) != dead_pid

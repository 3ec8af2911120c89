"""The unfinished-partitions query on a PostgreSQL ledger a finished crawl left, before any
ANALYZE or VACUUM (issue 28; bench/SCALE.md "unfinished query ms").

    python -m bench.unfinished_query postgresql://postgres@127.0.0.1:5432/query28_137k --rows 137590 --churn
    python -m bench.unfinished_query URL --rows 1000000 --churn --heartbeats 0 --keep

The database is dropped and created, the ledger made by `Ledger(url)` (the schema of this
tree) and autovacuum turned off for mc_tasks, so the ledger stays un-analyzed and
un-vacuumed as it is in the minutes after a crawl wrote it. Its rows are bench/synth_ledger's
(10,000 sources, 100 days), in the states a finished crawl leaves: every row committed but
one in `--unfinished-every` (failed, retry_wait or discovered). Two ways to get there:

- written (default): COPY of the rows in their final states (a bulk write, no dead rows);
- `--churn`: COPY of every row as discovered, then batches of rows moved through their states
  as the crawl moves them (claimed with a lease, `--heartbeats` lease renewals, downloaded,
  verified, committed or failed), each move a transaction: the table and its indexes hold the
  dead versions of every move (bloat).

Then, per stage (as left; after ANALYZE; after VACUUM), what the query costs in a fresh
engine: `unfinished_partition_counts` called `--repeat` times (the first is the first query
after the crawl), each with the plan it ran by, as auto_explain logged it (EXPLAIN ANALYZE,
BUFFERS of the statement SQLAlchemy sent, in its transaction). Apart from the query: a fresh
`Ledger(url)` (its connection and the schema check), a round trip and the statement's compile. `--index "cols"` swaps ix_mc_tasks_unfinished for another column
list (same predicate) before the rows go in, to compare candidates. Prints JSON; `--keep`
leaves the database (dropped otherwise).

Found (2026-12-03, PostgreSQL 15, 2 cores shared with other runs, so +-50 %): un-analyzed and
churned, the planner took a bitmap scan of ix_mc_tasks_state_lease, 688,638 index entries and
36,175 table pages for 688 unfinished rows at 137,590 rows (0.6-1.6 s every call), 4,005,000
entries for 5,000 at 1,000,000 (35 s first, 4.7-5.9 s every call after). Without bitmap scans
(reads.py) it is an index scan of the same index: the first call marks the dead entries (1.6 s;
3.3 s at 1M), the next ones skip them (41-78 ms; 275-290 ms at 1M) until VACUUM. The partial
index, bloated (42 MB for 688 entries; 227 MB for 5,000), looks dear to the planner and is
not taken; led by (day, source_key) instead, an index-only scan of it took 13.6 s first (the
dead entries in index order: a random table page each), then 48-124 ms.
"""
from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import make_url

from bench.synth_ledger import create_database, rows as synth_rows
from media_crawler.store import bulk_load
from media_crawler.store.database import dispose_engines, get_engine, normalize_url
from media_crawler.store.ledger import Ledger
from media_crawler.store.reports.reads import unfinished_partition_counts, unfinished_partition_query
from media_crawler.store.schema import UNFINISHED_PREDICATE

# The columns a discovered row has no value in yet (synth_ledger fills them for its final states).
NOT_YET = ("claimed_at", "started_at", "finished_at", "verified_at", "committed_at", "failed_at", "sha256", "size",
           "etag", "error_class", "error_code", "error_message", "lease_owner", "lease_expires_at",
           "next_attempt_at", "wait_reason", "wait_since", "wait_cause", "retry_after_s")
LEFT_UNFINISHED = ("failed", "retry_wait", "discovered")  # what a finished crawl leaves unfinished, in turn


def final_state(n: int, every: int) -> str:
    return LEFT_UNFINISHED[(n // every) % len(LEFT_UNFINISHED)] if n % every == 0 else "committed"


def ledger_rows(count: int, every: int, churn: bool, now: float):
    for n, row in enumerate(synth_rows(count, now)):
        if churn:
            row.update(dict.fromkeys(NOT_YET), state="discovered", attempts=0)
        else:
            row["state"] = final_state(n, every)
        yield row


def churn(engine, count: int, every: int, batch: int, heartbeats: int) -> float:
    """Every row moved through its states as the crawl moves it, a batch per transaction.
    The ids are 1..count in load order, so row id n+1 ends as final_state(n)."""
    started = time.monotonic()
    moves = [
        "state = 'downloading', lease_owner = 'bench/1/1', lease_expires_at = :t + 120, claimed_at = :t, "
        "started_at = :t, attempts = attempts + 1, run_id = 'bench-run', updated_at = :t",
        *["lease_expires_at = :t + 240, updated_at = :t"] * heartbeats,
        "state = 'downloaded', sha256 = md5(id::text) || md5(id::text), size = 100000 + id, finished_at = :t, "
        "lease_owner = NULL, lease_expires_at = NULL, updated_at = :t",
        "state = 'verified', verified_at = :t, updated_at = :t",
        # The last move: committed, or one of the unfinished states a finished crawl leaves (final_state).
        f"state = CASE WHEN (id - 1) % {every} <> 0 THEN 'committed' ELSE (ARRAY{list(LEFT_UNFINISHED)})"
        f"[((id - 1) / {every}) % {len(LEFT_UNFINISHED)} + 1] END, committed_at = :t, updated_at = :t",
    ]
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for low in range(1, count + 1, batch):
            for move in moves:
                conn.execute(text(f"UPDATE mc_tasks SET {move} WHERE id BETWEEN :low AND :high"),
                             dict(t=time.time(), low=low, high=low + batch - 1))
    return time.monotonic() - started


def relation_facts(conn) -> dict:
    out = {}
    for name in ("mc_tasks", "ix_mc_tasks_unfinished"):
        pages, tuples, visible, size = conn.execute(text(
            "SELECT relpages, reltuples, relallvisible, pg_relation_size(oid) FROM pg_class WHERE relname = :n"),
            dict(n=name)).one()
        out[name] = dict(relpages=pages, reltuples=tuples, relallvisible=visible, mb=round(size / 2 ** 20, 1))
    dead, live, analyzed = conn.execute(text(
        "SELECT n_dead_tup, n_live_tup, coalesce(last_analyze, last_autoanalyze) IS NOT NULL "
        "FROM pg_stat_user_tables WHERE relname = 'mc_tasks'")).one()
    out["mc_tasks"].update(n_dead_tup=dead, n_live_tup=live, analyzed=analyzed)
    out["states"] = dict(conn.execute(text("SELECT state, count(*) FROM mc_tasks GROUP BY state")).all())
    return out


# The plan of every query a connection runs, with its row counts and buffers, sent to the
# client as a LOG message (auto_explain, a module PostgreSQL ships): the plan of the very
# statement unfinished_partition_counts sends, in its own transaction, as it ran. No
# per-node timing, so the query's wall time is hardly changed.
AUTO_EXPLAIN = ("LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on; "
                "SET auto_explain.log_buffers = on; SET auto_explain.log_timing = off; SET client_min_messages = log")


def explain_every_query(engine) -> None:
    @event.listens_for(engine, "connect")
    def _load(dbapi_conn, _record):  # noqa: ANN001
        cursor = dbapi_conn.cursor()
        cursor.execute(AUTO_EXPLAIN)
        cursor.close()
        dbapi_conn.commit()  # SET outside a transaction that the pool would roll back


class PlansLogged(logging.Handler):
    """SQLAlchemy's psycopg2 dialect hands each message the server sent to its logger (INFO)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.plans: list[str] = []
        logger = logging.getLogger("sqlalchemy.dialects.postgresql")
        logger.setLevel(logging.INFO)
        logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "plan:" in message and "mc_tasks" in message and "GROUP BY" in message:
            self.plans.append(message)

    def take(self) -> list[str]:
        plans, self.plans = self.plans, []
        return plans


def measure(url: str, repeat: int) -> dict:
    """What a fresh process pays: open the ledger (connect, schema check), compile the
    statement, then the query, several times, each with the plan it ran by."""
    dispose_engines()
    t = time.perf_counter()
    explain_every_query(get_engine(url))
    ledger = Ledger(url)  # a fresh engine: connect, the schema version check
    ledger_ms = 1000 * (time.perf_counter() - t)
    with ledger.engine.connect() as conn:
        t = time.perf_counter()
        conn.exec_driver_sql("SELECT 1").scalar()
        round_trip_ms = 1000 * (time.perf_counter() - t)
    t = time.perf_counter()
    unfinished_partition_query().compile(dialect=ledger.engine.dialect)
    compile_ms = 1000 * (time.perf_counter() - t)
    logged = PlansLogged()
    times, plans, groups = [], [], 0
    for _ in range(repeat):
        t = time.perf_counter()
        groups = len(unfinished_partition_counts(ledger))
        times.append(1000 * (time.perf_counter() - t))
        plans.append(logged.take())
    logging.getLogger("sqlalchemy.dialects.postgresql").removeHandler(logged)
    with ledger.engine.connect() as conn:
        facts = relation_facts(conn)
    return dict(ledger_open_ms=round(ledger_ms, 1), round_trip_ms=round(round_trip_ms, 2),
                compile_ms=round(compile_ms, 2), query_ms=[round(x, 1) for x in times],
                later_median_ms=round(statistics.median(times[1:] or times), 1), groups=groups,
                first_plan=plans[0], later_plan=plans[-1], facts=facts)


def build(ledger, args, out: dict) -> None:
    """The rows, loaded (and moved, --churn) with autovacuum off for mc_tasks."""
    with ledger.engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE mc_tasks SET (autovacuum_enabled = off, toast.autovacuum_enabled = off)")
        if args.index:
            conn.exec_driver_sql("DROP INDEX ix_mc_tasks_unfinished")
            conn.exec_driver_sql(
                f"CREATE INDEX ix_mc_tasks_unfinished ON mc_tasks ({args.index}) WHERE {UNFINISHED_PREDICATE}")
        out["index_definition"] = conn.exec_driver_sql(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_mc_tasks_unfinished'").scalar()
    t = time.monotonic()
    bulk_load.load_tasks(ledger, ledger_rows(args.rows, args.unfinished_every, args.churn, time.time()))
    out["load_s"] = round(time.monotonic() - t, 1)
    if args.churn:
        out["churn_s"] = round(churn(ledger.engine, args.rows, args.unfinished_every, args.batch,
                                     args.heartbeats), 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="postgresql://... of a database this bench may drop and create")
    parser.add_argument("--rows", type=int, default=137_590)
    parser.add_argument("--unfinished-every", type=int, default=200, help="one row in N is left unfinished")
    parser.add_argument("--churn", action="store_true", help="move every row through its states (bloat)")
    parser.add_argument("--heartbeats", type=int, default=1, help="lease renewals per row while downloading")
    parser.add_argument("--batch", type=int, default=2000, help="rows per move (one transaction)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--index", help="columns of ix_mc_tasks_unfinished instead of the schema's, e.g. 'day, source_key'")
    parser.add_argument("--stages", default="left,analyze,vacuum", help="left (as written), analyze, vacuum")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--measure-only", action="store_true",
                        help="measure a ledger this bench built before (--keep; or its copy: createdb -T)")
    args = parser.parse_args(argv)
    url = normalize_url(args.url)
    if not url.startswith("postgresql"):
        parser.error("a PostgreSQL URL")
    if not args.measure_only:
        create_database(url)
    out: dict = dict(rows=args.rows, churn=args.churn, heartbeats=args.heartbeats,
                     unfinished_every=args.unfinished_every, index=args.index)
    try:
        ledger = Ledger(url)
        if not args.measure_only:
            build(ledger, args, out)
        out["sql"] = str(unfinished_partition_query().compile(dialect=ledger.engine.dialect))
        for stage in filter(None, args.stages.split(",")):
            if stage != "left":
                with ledger.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                    conn.exec_driver_sql("ANALYZE mc_tasks" if stage == "analyze" else "VACUUM mc_tasks")
            out[stage] = measure(url, args.repeat)
            print(f"{stage}: {out[stage]['query_ms']} ms", *out[stage]["first_plan"], *out[stage]["later_plan"],
                  sep="\n", file=sys.stderr, flush=True)
    finally:
        dispose_engines()
        if not args.keep:
            target = make_url(url)
            admin = create_engine(target.set(database="postgres"), isolation_level="AUTOCOMMIT")
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{target.database}"'))
            admin.dispose()
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

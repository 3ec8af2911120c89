"""bench/scale.py's PostgreSQL side: a database per row, its backends (for their CPU) and
what Dagster's event log and the ledger occupy in it."""
from __future__ import annotations

import uuid

PG = dict(host="127.0.0.1", port=5432, user="postgres")


def createdb() -> tuple[str, str]:
    import psycopg2

    name = f"mc_scale_{uuid.uuid4().hex[:8]}"
    admin = psycopg2.connect(dbname="postgres", **PG)
    admin.autocommit = True
    with admin.cursor() as cursor:
        cursor.execute(f'CREATE DATABASE "{name}"')
    admin.close()
    return name, f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}"


def dropdb(name: str) -> None:
    import psycopg2

    from media_crawler.store.database import dispose_engines

    dispose_engines()
    admin = psycopg2.connect(dbname="postgres", **PG)
    admin.autocommit = True
    with admin.cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.close()


def pg_query(db: str, sql: str, args=()):
    import psycopg2

    conn = psycopg2.connect(dbname=db, **PG)
    try:
        with conn.cursor() as cursor:
            cursor.execute(sql, args)
            return cursor.fetchall()
    finally:
        conn.close()


def backend_pids(db: str):
    def pids():
        try:
            return [row[0] for row in pg_query("postgres", "select pid from pg_stat_activity where datname = %s", (db,))]
        except Exception:
            return []
    return pids


def pg_figures(db: str, per_run: list[dict], items: int) -> dict:
    rows = pg_query(db, "select run_id, count(*), sum(pg_column_size(event)) from event_logs group by run_id")
    by_run = {r[0]: (r[1], int(r[2] or 0)) for r in rows}
    total_rows = sum(v[0] for v in by_run.values())
    total_bytes = sum(v[1] for v in by_run.values())
    table_bytes = pg_query(db, "select pg_total_relation_size('event_logs')")[0][0]
    tasks = pg_query(db, "select count(*), pg_total_relation_size('mc_tasks'), pg_relation_size('mc_tasks'), "
                         "coalesce(avg(pg_column_size(t.*)), 0) from mc_tasks t")[0]
    for run in per_run:
        run["event_log_rows"], run["event_log_bytes"] = by_run.get(run["run_id"], (0, 0))
    # How often each row was written: every UPDATE leaves a dead tuple version behind until vacuum.
    churn = pg_query(db, "select n_tup_ins, n_tup_upd, n_tup_hot_upd, n_dead_tup, n_live_tup from pg_stat_user_tables "
                         "where relname = 'mc_tasks'")
    indexes = pg_query(db, "select indexrelname, pg_relation_size(indexrelid) from pg_stat_user_indexes where relname = 'mc_tasks'")
    return dict(event_log_rows_total=total_rows, event_log_bytes_total=total_bytes,
                event_log_rows_without_run=by_run.get("", (0, 0))[0] + by_run.get(None, (0, 0))[0],
                event_logs_table_bytes=table_bytes,
                event_log_rows_per_10k_items=total_rows * 10_000 / max(items, 1),
                event_log_bytes_per_10k_items=total_bytes * 10_000 / max(items, 1),
                ledger_rows=tasks[0], ledger_bytes_per_row=tasks[1] / max(tasks[0], 1),
                ledger_heap_bytes_per_row=tasks[2] / max(tasks[0], 1), ledger_live_tuple_bytes=float(tasks[3]),
                ledger_churn=dict(zip(("inserts", "updates", "hot_updates", "dead_tuples", "live_tuples"), churn[0])) if churn else {},
                ledger_index_bytes_per_row={name: size / max(tasks[0], 1) for name, size in indexes})


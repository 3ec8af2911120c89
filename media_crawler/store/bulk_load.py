"""Rows loaded in bulk into a ledger, as the stages would have left them: a synthesized
ledger for the benchmarks (`python -m bench synth_ledger`), never a crawl's path.

A million rows through the Ledger's per-item moves would take hours; these take
minutes: COPY on PostgreSQL (then VACUUM ANALYZE, as autovacuum would after such a
load), executemany in batches on SQLite (no ANALYZE: the project never runs one
there). The schema is the ledger's own: open it with `Ledger(url)` first.
"""
from __future__ import annotations

import csv
import io
from typing import Callable, Iterable

from sqlalchemy import insert

from media_crawler.store import schema
from media_crawler.store.ledger import Ledger

TASK_COLUMNS = [column.name for column in schema.tasks.columns if column.name != "id"]  # a row's keys


def load_tasks(ledger: Ledger, rows: Iterable[dict], batch: int = 50_000,
               progress: Callable[[int], None] | None = None) -> int:
    """Insert `rows` (dicts keyed by TASK_COLUMNS) into mc_tasks; `progress(written)` after each batch."""
    load = _copy_tasks if ledger.engine.dialect.name == "postgresql" else _insert_tasks
    return load(ledger, rows, batch, progress or (lambda _written: None))


def load_feed_errors(ledger: Ledger, rows: Iterable[dict]) -> None:
    with ledger.engine.begin() as conn:
        conn.execute(insert(schema.feed_errors), list(rows))


def load_rate_budgets(ledger: Ledger, rows: Iterable[dict]) -> None:
    with ledger.engine.begin() as conn:
        conn.execute(insert(schema.rate_budget), list(rows))


def analyze(ledger: Ledger) -> None:
    """PostgreSQL: VACUUM ANALYZE after a load, as autovacuum would soon do (nothing on SQLite)."""
    if ledger.engine.dialect.name == "postgresql":
        with ledger.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE")


def _insert_tasks(ledger: Ledger, rows: Iterable[dict], batch: int, progress: Callable[[int], None]) -> int:
    statement, written = insert(schema.tasks), 0
    with ledger.engine.begin() as conn:
        chunk = []
        for written, row in enumerate(rows, 1):
            chunk.append(row)
            if len(chunk) >= batch:
                conn.execute(statement, chunk)
                chunk = []
                progress(written)
        if chunk:
            conn.execute(statement, chunk)
    return written


def _copy_tasks(ledger: Ledger, rows: Iterable[dict], batch: int, progress: Callable[[int], None]) -> int:
    sql = (f"COPY {schema.tasks.name} ({', '.join(TASK_COLUMNS)}) "
           "FROM STDIN WITH (FORMAT csv, DELIMITER E'\\t', NULL '\\N')")
    raw = ledger.engine.raw_connection()
    try:
        cursor = raw.cursor()
        buffer, written = io.StringIO(), 0
        writer = csv.writer(buffer, delimiter="\t", quotechar='"', lineterminator="\n")
        for row in rows:
            writer.writerow(["\\N" if row[column] is None else row[column] for column in TASK_COLUMNS])
            written += 1
            if written % batch == 0:
                buffer.seek(0)
                cursor.copy_expert(sql, buffer)
                buffer.seek(0)
                buffer.truncate()
                progress(written)
        buffer.seek(0)
        cursor.copy_expert(sql, buffer)
        raw.commit()
    finally:
        raw.close()
    return written

"""What the ledger keeps forever, and what it can let go of once an item is finished.

Kept forever, per finished row (committed or gone): the identity (platform,
item_id, variant) and state, which are the seen-set that stops re-downloads;
the manifest (`export`): kind, canonical URL, sha256, size, group, source, day,
publication and commit times, the platform's metadata, what the completing media
response said and the URI the archive files the item under (media_response, its
`uri` written when the media URL is released); the error class of a gone row, and the stage timestamps the delay histograms are made from.

Compactable: what only an unfinished item needs. Its signed media URL and backup
URLs (the largest columns: a feed walk hands out fresh ones whenever the item
is unfinished again), the resolve reference and its time, the resume validator
(etag), the last error message and code, the lease and the run id. Also the
raw bodies of feed errors resolved long ago, and the per-run feed-walk markers
(only a step retry of the same run reads them).

A compacted row that `reconcile --repair` re-queues (its blob was lost) has no
media URL until the next walk of its feed fills it in: `crawl` or `rerun-failed`
of its partition does that first.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from sqlalchemy import and_, bindparam, delete, func, or_, select, update

from media_crawler.scrub import archive_uri
from media_crawler.store import schema
from media_crawler.store.ledger import COMMITTED, GONE, Ledger

T, F, D = schema.tasks, schema.feed_errors, schema.source_days
# Values a compacted finished row holds in the columns only unfinished work reads.
RELEASED = {"media_url": "", "backup_urls": None, "resolve_ref": None, "resolved_at": None, "etag": None,
            "error_message": None, "error_code": None, "run_id": None, "lease_owner": None,
            "lease_expires_at": None, "next_attempt_at": None}
BATCH = 5_000


@dataclass
class Compaction:
    rows: int = 0
    feed_error_bodies: int = 0
    feed_walk_markers: int = 0


def compact(ledger: Ledger, *, before: float, dry_run: bool = False) -> Compaction:
    """Release what finished rows finished before `before` (unix time) no longer need."""
    done = Compaction()
    finished_before = or_(and_(T.c.state == COMMITTED, T.c.committed_at < before),
                          and_(T.c.state == GONE, T.c.failed_at < before))
    not_yet = or_(T.c.media_url != "", T.c.backup_urls.is_not(None), T.c.error_message.is_not(None))
    with ledger.engine.connect() as conn:
        if dry_run:
            done.rows = conn.execute(select(func.count()).where(finished_before, not_yet)).scalar() or 0
            done.feed_error_bodies = conn.execute(select(func.count()).select_from(F).where(
                F.c.resolved_at < before, F.c.raw_body.is_not(None))).scalar() or 0
            done.feed_walk_markers = conn.execute(select(func.count()).select_from(D).where(
                D.c.feed_done_at < before)).scalar() or 0
            return done
    while True:  # in batches: a big ledger is compacted without one huge transaction
        with ledger.engine.begin() as conn:
            rows = conn.execute(select(T.c.id, T.c.media_url, T.c.media_response)
                                .where(finished_before, not_yet).limit(BATCH)).all()
            if not rows:
                break
            # The URI the archive files the item under outlives its media URL: a later export
            # must file (and refer a revisit to) the item where an earlier one did.
            kept_uris = [{"row_id": row.id, "said": _said_with_uri(row.media_response, row.media_url)}
                         for row in rows if row.media_url]
            if kept_uris:
                conn.execute(update(T).where(T.c.id == bindparam("row_id"), finished_before)
                             .values(media_response=bindparam("said")), kept_uris)
            # Guarded again on the state: a row re-queued meanwhile keeps its URL.
            done.rows += conn.execute(update(T).where(T.c.id.in_([row.id for row in rows]), finished_before)
                                      .values(**RELEASED)).rowcount
    with ledger.engine.begin() as conn:
        done.feed_error_bodies = conn.execute(update(F).where(F.c.resolved_at < before, F.c.raw_body.is_not(None))
                                              .values(raw_body=None)).rowcount
        done.feed_walk_markers = conn.execute(delete(D).where(D.c.feed_done_at < before)).rowcount
    return done


def _said_with_uri(said: str | None, media_url: str) -> str:
    """media_response's JSON with the archive's URI of `media_url` added."""
    try:
        values = json.loads(said) if said else {}
    except ValueError:
        values = {}
    if not isinstance(values, dict):
        values = {}
    values["uri"] = archive_uri(media_url)
    return json.dumps(values, sort_keys=True)


def reclaim_space(ledger: Ledger) -> None:
    """Give the released bytes back to the file system (SQLite VACUUM) or to the table
    (PostgreSQL VACUUM, which needs no exclusive lock; VACUUM FULL would)."""
    if ledger.engine.dialect.name == "sqlite":
        # Past SQLAlchemy's connection: its begin hook (BEGIN IMMEDIATE, store/database.py)
        # would open the transaction VACUUM cannot run in.
        raw = ledger.engine.raw_connection()
        try:
            cursor = raw.cursor()
            cursor.execute("VACUUM")
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # WAL mode: the rewrite lands in the file
        finally:
            raw.close()
        return
    with ledger.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for table in (T, schema.api_answers):  # the second: `--answers-older-than` deletes its rows
            conn.exec_driver_sql(f'VACUUM ANALYZE "{table.name}"')


def ledger_bytes(ledger: Ledger) -> int | None:
    """Bytes the ledger's rows take: the SQLite file, or mc_tasks with its indexes on PostgreSQL."""
    url = ledger.engine.url
    if ledger.engine.dialect.name == "sqlite":
        import os

        if not url.database:
            return None
        return sum(os.path.getsize(path) for path in (url.database, f"{url.database}-wal") if os.path.exists(path))
    with ledger.engine.connect() as conn:
        return conn.execute(select(func.pg_total_relation_size(T.name))).scalar()

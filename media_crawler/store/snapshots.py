"""Reads of a ledger by URL that is not the crawl's open ledger: a backup's snapshot.

Each opens an engine of its own and disposes of it before returning: the
snapshot's file is about to be moved or checked, and the process-wide engines
of store/database.py would keep a connection to it. Nothing is migrated: a
snapshot is read as it was taken.
"""
from __future__ import annotations

from sqlalchemy import create_engine, func, inspect, select

from media_crawler.store import schema
from media_crawler.store.database import normalize_url


def leases_held_in(url: str) -> int:
    """How many rows of the ledger at `url` hold a lease."""
    T = schema.tasks
    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as conn:
            return conn.execute(select(func.count()).where(T.c.lease_owner.is_not(None))).scalar() or 0
    finally:
        engine.dispose()


def schema_version_in(url: str) -> int | None:
    """The ledger's schema version (store/schema.py SCHEMA_VERSION when it was last opened), or None."""
    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table(schema.schema_version.name):
                return None
            return conn.execute(select(func.max(schema.schema_version.c.version))).scalar()
    finally:
        engine.dispose()

"""The database halves of `health --live` and `--ready`: does it answer, does it take a write."""
from __future__ import annotations

import time
import uuid

from sqlalchemy import text
from sqlalchemy.engine import Engine

from media_crawler.store import schema


def select_one(engine: Engine) -> None:
    with engine.connect() as conn:
        conn.execute(text("SELECT 1")).scalar_one()


def probe_write(engine: Engine) -> str:
    """Insert a throwaway cursor row and roll it back: a real write (lock, WAL or journal), no trace left."""
    with engine.connect() as conn:
        transaction = conn.begin()
        try:
            conn.execute(schema.cursors.insert().values(
                source_key="__health__", name=uuid.uuid4().hex[:16], value="probe", updated_at=time.time()))
        finally:
            transaction.rollback()
    return "insert rolled back"

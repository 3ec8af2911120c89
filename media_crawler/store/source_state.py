"""Per-source state in the ledger: the shard layout in force, registered sources,
finished feed walks (schema version 4; media_crawler/shards.py says why)."""
from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Iterable, Mapping, Sequence

from sqlalchemy import delete, func, insert, select
from sqlalchemy.exc import IntegrityError

from media_crawler.store import schema
from media_crawler.store.ledger import Ledger

L, S, D, T, F = schema.layout, schema.sources, schema.source_days, schema.tasks, schema.feed_errors
# SQLite allows 32,766 bound parameters per statement; stay far below it.
_CHUNK = 500


def recorded_layout(ledger: Ledger) -> dict[str, int]:
    """Shard counts per platform this ledger was last laid out with ({} when never)."""
    with ledger.engine.connect() as conn:
        return {row.platform: row.shards for row in conn.execute(select(L.c.platform, L.c.shards))}


def record_layout(ledger: Ledger, shards: Mapping[str, int]) -> None:
    now = time.time()
    with ledger.engine.begin() as conn:
        conn.execute(delete(L))
        conn.execute(insert(L), [{"platform": platform, "shards": count, "recorded_at": now}
                                 for platform, count in shards.items()])


def record_first_layout(ledger: Ledger, shards: Mapping[str, int]) -> dict[str, int]:
    """Record the layout of a home that has none; returns the one in force (another
    process starting at the same moment may have recorded its own first)."""
    try:
        record_layout(ledger, shards)
    except IntegrityError:
        return recorded_layout(ledger)
    return dict(shards)


def sources_with_items(ledger: Ledger) -> list[tuple[str, str]]:
    """(source_key, platform) of every source the ledger holds items of."""
    with ledger.engine.connect() as conn:
        return [(row[0], row[1]) for row in conn.execute(select(T.c.source_key, T.c.platform).distinct())]


def registered_source_keys(ledger: Ledger) -> set[str]:
    with ledger.engine.connect() as conn:
        return {row[0] for row in conn.execute(select(S.c.source_key))}


def register_sources(ledger: Ledger, sources: Iterable[tuple[str, str]]) -> list[str]:
    """Register (source_key, platform) pairs; returns the keys that were new."""
    wanted = dict(sources)
    new = sorted(set(wanted) - registered_source_keys(ledger))
    now = time.time()
    with ledger.engine.begin() as conn:
        for start in range(0, len(new), _CHUNK):
            conn.execute(insert(S), [{"source_key": key, "platform": wanted[key], "registered_at": now}
                                     for key in new[start:start + _CHUNK]])
    return new


def finished_feeds(ledger: Ledger, source_keys: Sequence[str], day: str, run_id: str) -> set[str]:
    """The sources among source_keys whose feed walk for `day` finished in run `run_id`."""
    done: set[str] = set()
    with ledger.engine.connect() as conn:
        for start in range(0, len(source_keys), _CHUNK):
            chunk = list(source_keys[start:start + _CHUNK])
            done.update(row[0] for row in conn.execute(
                select(D.c.source_key).where(D.c.day == day, D.c.run_id == run_id, D.c.source_key.in_(chunk))))
    return done


def mark_feed_finished(ledger: Ledger, source_key: str, day: str, items_new: int, run_id: str | None) -> None:
    with ledger.engine.begin() as conn:
        conn.execute(delete(D).where(D.c.source_key == source_key, D.c.day == day))
        conn.execute(insert(D).values(source_key=source_key, day=day, feed_done_at=time.time(), run_id=run_id,
                                      items_new=items_new))


def finished_feed_count(ledger: Ledger) -> int:
    with ledger.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(D)).scalar() or 0


def open_feed_error_since(ledger: Ledger, source_key: str, day: str) -> float | None:
    """When the oldest unresolved feed error of (source, day) was recorded."""
    with ledger.engine.connect() as conn:
        return conn.execute(select(func.min(F.c.at)).where(
            F.c.source_key == source_key, F.c.day == day, F.c.resolved_at.is_(None), F.c.item_id.is_(None))).scalar()


def open_feed_errors(ledger: Ledger, source_keys: Sequence[str], day: str) -> list[dict]:
    """Sources among source_keys whose feed for `day` has unresolved page errors (an item
    that could not be normalized is reported, but keeps no partition red):
    {source, error_class, since (ISO, the oldest), message (the newest)}, by source."""
    by_source: dict[str, dict] = {}
    with ledger.engine.connect() as conn:
        for start in range(0, len(source_keys), _CHUNK):
            query = (select(F.c.source_key, F.c.error_class, F.c.message, F.c.at)
                     .where(F.c.day == day, F.c.resolved_at.is_(None), F.c.item_id.is_(None),
                            F.c.source_key.in_(list(source_keys[start:start + _CHUNK])))
                     .order_by(F.c.at))
            for row in conn.execute(query):
                entry = by_source.setdefault(row.source_key, {"source": row.source_key, "since": iso_time(row.at)})
                entry.update(error_class=row.error_class, message=row.message or "")
    return [by_source[key] for key in sorted(by_source)]


def iso_time(unix: float) -> str:
    return datetime.fromtimestamp(unix, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")

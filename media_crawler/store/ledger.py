"""The ledger: per-item state, the seen-set, leases and cursors.

Every stage advances rows of one partition (source_key, day) from one state to
the next; see docs/DESIGN.md for the state machine. Writes are batched: one
transaction per batch of items, never one commit per file.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from sqlalchemy import and_, func, or_, select, update

from media_crawler.errors import CrawlError, FinalState
from media_crawler.models import MediaRecord, iso_utc
from media_crawler.store import schema
from media_crawler.store.database import get_engine, migrate

T = schema.tasks

DISCOVERED, DOWNLOADING, DOWNLOADED, VERIFIED, COMMITTED = "discovered", "downloading", "downloaded", "verified", "committed"
RETRY_WAIT, FAILED, GONE = "retry_wait", "failed", FinalState.GONE.value
FINISHED_STATES = (COMMITTED, GONE)
STATES = (DISCOVERED, DOWNLOADING, DOWNLOADED, VERIFIED, COMMITTED, RETRY_WAIT, FAILED, GONE)


@dataclass(frozen=True)
class Task:
    """A ledger row as the stages see it."""

    id: int
    platform: str
    item_id: str
    variant: str
    kind: str
    source_key: str
    day: str
    canonical_url: str
    media_url: str
    backup_urls: tuple[str, ...]
    group_key: str | None
    resolve_ref: str | None
    resolved_at: float | None
    meta: Mapping[str, Any]
    expected_sha256: str | None
    expected_size: int | None
    state: str
    attempts: int
    sha256: str | None
    size: int | None
    etag: str | None
    error_class: str | None

    @property
    def staging_name(self) -> str:
        # Staging names come from the row id: never from a URL or a title.
        return f"task-{self.id}"

    def as_record(self) -> MediaRecord:
        return MediaRecord(
            platform=self.platform, item_id=self.item_id, variant=self.variant, kind=self.kind,
            canonical_url=self.canonical_url, media_url=self.media_url, backup_urls=self.backup_urls,
            group=self.group_key, resolve_ref=self.resolve_ref, expected_sha256=self.expected_sha256,
            expected_size=self.expected_size, meta=self.meta,
        )


def _task(row: Any) -> Task:
    return Task(
        id=row.id, platform=row.platform, item_id=row.item_id, variant=row.variant, kind=row.kind,
        source_key=row.source_key, day=row.day, canonical_url=row.canonical_url, media_url=row.media_url,
        backup_urls=tuple(json.loads(row.backup_urls or "[]")), group_key=row.group_key,
        resolve_ref=row.resolve_ref, resolved_at=row.resolved_at, meta=json.loads(row.meta or "{}"),
        expected_sha256=row.expected_sha256, expected_size=row.expected_size, state=row.state,
        attempts=row.attempts, sha256=row.sha256, size=row.size, etag=row.etag, error_class=row.error_class,
    )


@dataclass
class DiscoverySummary:
    new: int = 0
    skipped_seen: int = 0  # already committed or gone: the seen-set held them
    in_progress: int = 0  # known and not finished: left for the later stages
    requeued: int = 0  # failed before; this run tries them again


class Ledger:
    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = get_engine(url)
        migrate(self.engine)

    # -- discovery -----------------------------------------------------------
    def record_discovered(
        self, records: Sequence[MediaRecord], *, source_key: str, day: str, run_id: str | None = None
    ) -> DiscoverySummary:
        """Insert new records; refresh the signed URL of unfinished ones; skip seen ones."""
        summary = DiscoverySummary()
        now = time.time()
        with self.engine.begin() as conn:
            for record in records:
                existing = conn.execute(
                    select(T.c.id, T.c.state).where(
                        T.c.platform == record.platform, T.c.item_id == record.item_id, T.c.variant == record.variant
                    )
                ).first()
                if existing is None:
                    conn.execute(T.insert().values(
                        **_record_columns(record), source_key=source_key, day=day, state=DISCOVERED, attempts=0,
                        run_id=run_id, discovered_at=now, queued_at=now, resolved_at=now, updated_at=now,
                    ))
                    summary.new += 1
                elif existing.state in FINISHED_STATES:
                    summary.skipped_seen += 1
                else:
                    values: dict[str, Any] = {
                        "media_url": record.media_url, "backup_urls": json.dumps(list(record.backup_urls)),
                        "resolved_at": now, "updated_at": now,
                    }
                    if existing.state in (FAILED, RETRY_WAIT):
                        # A new run of the partition gives failed items a fresh budget.
                        values.update(state=DISCOVERED, attempts=0, next_attempt_at=None, queued_at=now)
                        summary.requeued += 1
                    else:
                        summary.in_progress += 1
                    conn.execute(update(T).where(T.c.id == existing.id).values(**values))
        return summary

    # -- claims and leases ---------------------------------------------------
    def claim(
        self, *, source_key: str | None, day: str | None, owner: str, lease_s: float, limit: int = 10_000,
        states: Sequence[str] = (DISCOVERED, RETRY_WAIT), run_id: str | None = None, ignore_backoff: bool = False,
    ) -> list[Task]:
        """Lease claimable rows to `owner`. Rows leased by a worker whose lease
        expired are claimable again: that worker is presumed dead."""
        now = time.time()
        ready = [T.c.state == DISCOVERED]
        if RETRY_WAIT in states:
            ready.append(and_(T.c.state == RETRY_WAIT, or_(T.c.next_attempt_at.is_(None), T.c.next_attempt_at <= now))
                         if not ignore_backoff else T.c.state == RETRY_WAIT)
        ready.append(and_(T.c.state == DOWNLOADING, T.c.lease_expires_at < now))
        query = select(T).where(or_(*ready))
        if source_key is not None:
            query = query.where(T.c.source_key == source_key)
        if day is not None:
            query = query.where(T.c.day == day)
        query = query.order_by(T.c.id).limit(limit)
        if self.engine.dialect.name == "postgresql":
            query = query.with_for_update(skip_locked=True)
        with self.engine.begin() as conn:
            rows = conn.execute(query).fetchall()
            if not rows:
                return []
            ids = [row.id for row in rows]
            conn.execute(update(T).where(T.c.id.in_(ids)).values(
                state=DOWNLOADING, lease_owner=owner, lease_expires_at=now + lease_s, claimed_at=now,
                run_id=run_id, updated_at=now,
            ))
        return [_task(row) for row in rows]

    def heartbeat(self, owner: str, lease_s: float) -> int:
        now = time.time()
        with self.engine.begin() as conn:
            return conn.execute(update(T).where(T.c.lease_owner == owner, T.c.state == DOWNLOADING).values(
                lease_expires_at=now + lease_s)).rowcount

    # -- stage transitions (batched) ----------------------------------------
    def apply(self, changes: Iterable[tuple[int, str | None, Mapping[str, Any]]]) -> int:
        """Apply many (task_id, expected_owner_or_None, values) updates in one
        transaction. A row whose lease moved to another owner is left alone:
        the other owner's result wins, so two runs never both advance it."""
        changed = 0
        now = time.time()
        with self.engine.begin() as conn:
            for task_id, owner, values in changes:
                stmt = update(T).where(T.c.id == task_id)
                if owner is not None:
                    stmt = stmt.where(T.c.lease_owner == owner)
                changed += conn.execute(stmt.values(updated_at=now, **values)).rowcount
        return changed

    @staticmethod
    def downloaded(sha256: str, size: int, etag: str | None, started_at: float) -> dict[str, Any]:
        now = time.time()
        return {"state": DOWNLOADED, "sha256": sha256, "size": size, "etag": etag, "started_at": started_at,
                "finished_at": now, "lease_owner": None, "lease_expires_at": None, "error_class": None,
                "error_code": None, "error_message": None}

    @staticmethod
    def failed(error: CrawlError, attempts: int, retry_at: float | None) -> dict[str, Any]:
        """Values for a failed attempt: retry_wait while retryable, else the class's final state."""
        policy = error.policy
        if policy.retryable and retry_at is not None:
            state = RETRY_WAIT
        else:
            state = policy.final_state.value
        return {"state": state, "attempts": attempts, "next_attempt_at": retry_at if state == RETRY_WAIT else None,
                "error_class": error.error_class.value, "error_code": error.platform_code,
                "error_message": error.message[:2000], "lease_owner": None, "lease_expires_at": None,
                "failed_at": time.time()}

    def tasks(self, *, source_key: str | None = None, day: str | None = None, states: Sequence[str] | None = None,
              limit: int | None = None) -> list[Task]:
        query = select(T)
        if source_key is not None:
            query = query.where(T.c.source_key == source_key)
        if day is not None:
            query = query.where(T.c.day == day)
        if states is not None:
            query = query.where(T.c.state.in_(list(states)))
        query = query.order_by(T.c.id)
        if limit:
            query = query.limit(limit)
        with self.engine.connect() as conn:
            return [_task(row) for row in conn.execute(query)]

    def state_counts(self, *, source_key: str | None = None, day: str | None = None) -> dict[str, int]:
        query = select(T.c.state, func.count()).group_by(T.c.state)
        if source_key is not None:
            query = query.where(T.c.source_key == source_key, T.c.day == day)
        with self.engine.connect() as conn:
            return {state: count for state, count in conn.execute(query)}

    def failure_counts(self, *, source_key: str, day: str) -> dict[str, int]:
        query = (select(T.c.error_class, func.count()).where(
            T.c.source_key == source_key, T.c.day == day, T.c.state.in_([RETRY_WAIT, FAILED, GONE]))
            .group_by(T.c.error_class))
        with self.engine.connect() as conn:
            return {error_class or "unknown": count for error_class, count in conn.execute(query)}

    def committed_sha256s(self) -> set[str]:
        with self.engine.connect() as conn:
            return {row[0] for row in conn.execute(select(T.c.sha256).where(T.c.state == COMMITTED))}

    # -- cursors (platforms.base.CursorStore) -------------------------------
    def get_cursor(self, source_key: str, name: str) -> str | None:
        C = schema.cursors
        with self.engine.connect() as conn:
            row = conn.execute(select(C.c.value).where(C.c.source_key == source_key, C.c.name == name)).first()
        return row[0] if row else None

    def set_cursor(self, source_key: str, name: str, value: str) -> None:
        C = schema.cursors
        with self.engine.begin() as conn:
            done = conn.execute(update(C).where(C.c.source_key == source_key, C.c.name == name).values(
                value=value, updated_at=time.time())).rowcount
            if not done:
                conn.execute(C.insert().values(source_key=source_key, name=name, value=value, updated_at=time.time()))

    # -- page-level failures ---------------------------------------------------
    def record_feed_error(self, *, source_key: str, day: str, platform: str, error: CrawlError,
                          raw_body: str | None = None, run_id: str | None = None) -> None:
        with self.engine.begin() as conn:
            conn.execute(schema.feed_errors.insert().values(
                source_key=source_key, day=day, platform=platform, error_class=error.error_class.value,
                platform_code=error.platform_code, message=error.message[:2000],
                raw_body=(raw_body or None) and raw_body[:100_000], run_id=run_id, at=time.time()))

    def resolve_feed_errors(self, *, source_key: str, day: str) -> None:
        F = schema.feed_errors
        with self.engine.begin() as conn:
            conn.execute(update(F).where(F.c.source_key == source_key, F.c.day == day, F.c.resolved_at.is_(None))
                         .values(resolved_at=time.time()))


def _record_columns(record: MediaRecord) -> dict[str, Any]:
    return {
        "platform": record.platform, "item_id": record.item_id, "variant": record.variant, "kind": record.kind,
        "canonical_url": record.canonical_url, "media_url": record.media_url,
        "backup_urls": json.dumps(list(record.backup_urls)), "group_key": record.group,
        "resolve_ref": record.resolve_ref, "published_at": iso_utc(record.published_at),
        "meta": json.dumps(dict(record.meta), ensure_ascii=False, default=str),
        "expected_sha256": record.expected_sha256, "expected_size": record.expected_size,
    }

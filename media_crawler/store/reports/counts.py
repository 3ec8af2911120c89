"""How many rows are where: the ledger's counts by state, platform, age and outcome.

Each function is one or two aggregate queries (SQLAlchemy Core, SQLite and
PostgreSQL alike) taking `now` explicitly, so `status` and `metrics` read the
same definitions and tests need no clock.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import and_, case, func, select
from sqlalchemy.engine import Engine

from media_crawler.store import schema
from media_crawler.store.reports.failures import FAILED_STAGE

T = schema.tasks
F = schema.feed_errors
A = schema.api_answers

HOUR_S = 3600.0
# Rows not finished (committed/gone): what is waiting, running or stuck.
BACKLOG_STATES = ("discovered", "downloading", "downloaded", "verified", "retry_wait", "failed")
# Every state but committed (store/ledger.py STATES).
UNCOMMITTED_STATES = (*BACKLOG_STATES, "gone")
# Age in the current state (now - updated_at), in buckets an operator reads at a glance.
AGE_BUCKETS = ((300.0, "<5m"), (HOUR_S, "5m-1h"), (24 * HOUR_S, "1h-24h"))
OLDEST_BUCKET = ">24h"


def _unindexed(column):
    """`column || ''`: the same value, which no index orders, so a planner grouping by it
    keeps the index of the WHERE (SQLite would rather scan an index ordered by the column)."""
    return column.concat("")


def state_counts(engine: Engine) -> dict[tuple[str, str], int]:
    """(platform, state) -> rows."""
    query = select(T.c.platform, T.c.state, func.count()).group_by(T.c.platform, T.c.state)
    with engine.connect() as conn:
        return {(platform, state): count for platform, state, count in conn.execute(query)}


def backlog(engine: Engine, now: float) -> dict[str, dict[str, Any]]:
    """Per unfinished state: count, age of the oldest row in it, counts per age bucket."""
    age = now - func.coalesce(T.c.updated_at, T.c.discovered_at, now)
    bucket = case(*((age < limit, name) for limit, name in AGE_BUCKETS), else_=OLDEST_BUCKET).label("bucket")
    query = (select(T.c.state, bucket, func.count(), func.max(age)).where(T.c.state.in_(BACKLOG_STATES))
             .group_by(T.c.state, bucket))
    result: dict[str, dict[str, Any]] = {}
    with engine.connect() as conn:
        for state, bucket_name, count, oldest in conn.execute(query):
            entry = result.setdefault(state, {"count": 0, "oldest_age_s": 0.0, "ages": {}})
            entry["count"] += count
            entry["ages"][bucket_name] = count
            entry["oldest_age_s"] = round(max(entry["oldest_age_s"], float(oldest or 0.0)), 1)
        due = conn.execute(select(func.count()).where(T.c.state == "retry_wait", func.coalesce(
            T.c.next_attempt_at, 0) <= now)).scalar_one()
    if "retry_wait" in result:
        result["retry_wait"]["due_now"] = due  # the rest wait for their backoff to pass
    return result


def committed_totals(engine: Engine, since: float | None = None) -> dict[str, dict[str, int]]:
    """platform -> {items, bytes} committed (since `since` when given)."""
    if since is None:
        query = (select(T.c.platform, func.count(), func.coalesce(func.sum(T.c.size), 0))
                 .where(T.c.state == "committed").group_by(T.c.platform))
    else:
        # By the committed_at index: the state is tested in the aggregate (else the planner
        # may prefer the state index and read every committed row), and the group key is an
        # expression (else SQLite reads the whole table in the order of the identity index).
        committed = T.c.state == "committed"
        platform = _unindexed(T.c.platform)
        query = (select(platform, func.coalesce(func.sum(case((committed, 1), else_=0)), 0),
                        func.coalesce(func.sum(case((committed, T.c.size), else_=0)), 0))
                 .where(T.c.committed_at >= since).group_by(platform))
    with engine.connect() as conn:
        rows = [row for row in conn.execute(query).fetchall() if row[1]]
    return {platform: {"items": count, "bytes": int(size)} for platform, count, size in rows}


def failing_items(engine: Engine) -> dict[tuple[str, str, str, str], int]:
    """(platform, stage, error_class, state) -> rows failing now (retry_wait, failed, gone)."""
    stage = FAILED_STAGE.label("stage")
    error_class = func.coalesce(T.c.error_class, "unknown").label("error_class")
    query = (select(T.c.platform, stage, error_class, T.c.state, func.count())
             .where(T.c.state.in_(["retry_wait", "failed", "gone"])).group_by(T.c.platform, stage, error_class, T.c.state))
    with engine.connect() as conn:
        return {(p, s, e, st): n for p, s, e, st, n in conn.execute(query)}


def unresolved_feed_errors(engine: Engine) -> dict[tuple[str, str], int]:
    """(platform, error_class) -> page failures not yet followed by a successful fetch."""
    query = (select(F.c.platform, F.c.error_class, func.count()).where(F.c.resolved_at.is_(None))
             .group_by(F.c.platform, F.c.error_class))
    with engine.connect() as conn:
        return {(platform, error_class): count for platform, error_class, count in conn.execute(query)}


def expired_leases(engine: Engine, now: float) -> dict[str, Any]:
    """Rows leased by workers that stopped renewing (the lease expired while still downloading)."""
    uncertain = and_(T.c.state == "downloading", T.c.lease_expires_at < now)
    with engine.connect() as conn:
        by_platform = dict(conn.execute(select(T.c.platform, func.count()).where(uncertain).group_by(T.c.platform)).fetchall())
        owners = conn.execute(select(T.c.lease_owner, func.count()).where(uncertain).group_by(T.c.lease_owner)
                              .order_by(func.count().desc()).limit(10)).fetchall()
        oldest = conn.execute(select(func.min(T.c.lease_expires_at)).where(uncertain)).scalar_one()
    return {"count": sum(by_platform.values()), "by_platform": by_platform,
            "by_owner": {owner or "unknown": count for owner, count in owners}, "oldest_expired_at": oldest}


def finished_outcomes(engine: Engine,
                      committed: dict[str, dict[str, int]] | None = None) -> dict[tuple[str, str, str], int]:
    """(platform, state, error_class) -> rows finished for good: committed (class "none") or
    gone (by class). `committed`: committed_totals() when the caller has it already."""
    committed = committed_totals(engine) if committed is None else committed
    outcomes = {(platform, "committed", "none"): entry["items"] for platform, entry in committed.items()}
    error_class = func.coalesce(T.c.error_class, "unknown")
    query = (select(T.c.platform, error_class, func.count()).where(T.c.state == "gone")
             .group_by(T.c.platform, error_class))
    with engine.connect() as conn:
        outcomes.update({(platform, "gone", cls): count for platform, cls, count in conn.execute(query)})
    return dict(sorted(outcomes.items()))


def last_commit_at(engine: Engine) -> float | None:
    with engine.connect() as conn:
        return conn.execute(select(func.max(T.c.committed_at))).scalar_one()


def kept_answers(engine: Engine) -> dict[str, dict[str, int]]:
    """API answers kept as fetched (pipeline/answers.py), per platform: answers and the bytes
    their bodies hold (a body kept twice is one blob, counted twice)."""
    query = select(A.c.platform, func.count(), func.coalesce(func.sum(A.c.size), 0)).group_by(A.c.platform)
    with engine.connect() as conn:
        return {platform: {"answers": int(count), "bytes": int(size)} for platform, count, size in conn.execute(query)}

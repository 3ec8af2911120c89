"""Numbers read from the ledger: what `status` prints and `metrics` exposes.

Every function is one or two aggregate queries (SQLAlchemy Core, SQLite and
PostgreSQL alike) taking `now` explicitly, so both commands see the same
definitions and tests need no clock. Stage delays are computed from the
per-stage timestamps the stages write (schema.tasks), each delay separately:
an average over all of them would hide which one is growing.
"""
from __future__ import annotations

import math
from typing import Any

from sqlalchemy import and_, case, func, select
from sqlalchemy.engine import Engine

from media_crawler.observe.failures import FAILED_STAGE
from media_crawler.store import schema

T = schema.tasks
F = schema.feed_errors
B = schema.rate_budget
HOUR_S = 3600.0
# Rows not finished (committed/gone): what is waiting, running or stuck.
BACKLOG_STATES = ("discovered", "downloading", "downloaded", "verified", "retry_wait", "failed")
# Age in the current state (now - updated_at), in buckets an operator reads at a glance.
AGE_BUCKETS = ((300.0, "<5m"), (HOUR_S, "5m-1h"), (24 * HOUR_S, "1h-24h"))
OLDEST_BUCKET = ">24h"
# (name, from column, to column): each is measured on its own.
STAGE_DELAYS = (
    ("queue", "queued_at", "claimed_at"),  # waiting for a worker to lease it
    ("claim", "claimed_at", "started_at"),  # leased, waiting for a download thread
    ("execution", "started_at", "finished_at"),  # downloading, retries in the step included
    ("verify", "finished_at", "verified_at"),  # staged, waiting for and running verification
    ("commit", "verified_at", "committed_at"),  # verified, waiting for and running the commit
)
DELAY_WINDOW_S = 24 * HOUR_S  # delays of items whose later stage happened in the last day
DELAY_SAMPLE_LIMIT = 50_000  # most recent rows per delay: bounded work on a huge ledger


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
    query = select(T.c.platform, func.count(), func.coalesce(func.sum(T.c.size), 0)).where(T.c.state == "committed")
    if since is not None:
        query = query.where(T.c.committed_at >= since)
    with engine.connect() as conn:
        rows = conn.execute(query.group_by(T.c.platform)).fetchall()
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


def platform_health(engine: Engine, now: float, platforms: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Per platform: rate limited (since when, until when slowed) and auth failures, over the last hour."""
    since = now - HOUR_S
    task_errors = (select(T.c.platform, T.c.error_class, func.count(), func.min(T.c.failed_at))
                   .where(T.c.error_class.in_(["rate_limited", "auth"]), T.c.failed_at >= since,
                          T.c.state.in_(["retry_wait", "failed"]))
                   .group_by(T.c.platform, T.c.error_class))
    page_errors = (select(F.c.platform, F.c.error_class, func.count(), func.min(F.c.at))
                   .where(F.c.error_class.in_(["rate_limited", "auth"]), F.c.at >= since)
                   .group_by(F.c.platform, F.c.error_class))
    health = {name: _healthy() for name in platforms}
    with engine.connect() as conn:
        for platform, error_class, count, first in [*conn.execute(task_errors), *conn.execute(page_errors)]:
            entry = health.setdefault(platform, _healthy())
            prefix = "rate_limited" if error_class == "rate_limited" else "auth"
            count_key = "rate_limited_errors_1h" if prefix == "rate_limited" else "auth_failures_1h"
            since_key = "rate_limited_since" if prefix == "rate_limited" else "auth_failed_since"
            entry[count_key] += count
            entry[since_key] = min(x for x in (entry[since_key], first) if x is not None)
        budgets = conn.execute(select(B.c.platform, B.c.rate, B.c.slow_until)).fetchall()
    for platform, rate, slow_until in budgets:
        if platform in health:
            health[platform]["rate_per_s"] = rate
            if slow_until and slow_until > now:
                health[platform]["slowed_until"] = slow_until
    for entry in health.values():
        entry["rate_limited"] = bool(entry["rate_limited_errors_1h"] or entry["slowed_until"])
        entry["status"] = "auth_failed" if entry["auth_failures_1h"] else "rate_limited" if entry["rate_limited"] else "ok"
    return health


def _healthy() -> dict[str, Any]:
    return {"status": "ok", "rate_limited": False, "rate_limited_since": None, "rate_limited_errors_1h": 0,
            "slowed_until": None, "rate_per_s": None, "auth_failures_1h": 0, "auth_failed_since": None}


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


def stage_delays(engine: Engine, now: float, window_s: float = DELAY_WINDOW_S) -> dict[str, dict[str, Any]]:
    """Per stage delay: count, p50, p95 and max, in seconds, over items whose later stamp is recent."""
    result = {}
    with engine.connect() as conn:
        for name, start, end in STAGE_DELAYS:
            begin, finish = T.c[start], T.c[end]
            query = (select(finish - begin).where(begin.isnot(None), finish >= now - window_s, finish >= begin)
                     .order_by(finish.desc()).limit(DELAY_SAMPLE_LIMIT))
            values = sorted(float(row[0]) for row in conn.execute(query))
            result[name] = {"count": len(values), "p50": _round(percentile(values, 50)),
                            "p95": _round(percentile(values, 95)), "max": _round(values[-1] if values else None),
                            "sum": round(sum(values), 3)}
    return result


def percentile(sorted_values: list[float], pct: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default; statistics' "inclusive")."""
    if not sorted_values:
        return None
    position = (len(sorted_values) - 1) * pct / 100
    low, high = math.floor(position), math.ceil(position)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)

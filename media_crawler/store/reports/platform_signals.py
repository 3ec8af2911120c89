"""How each platform is doing, from every signal the ledger holds: auth failures,
rate limits and the shared budget, and server-side failures of media and feed
requests against successes over the last hour (`platform_outage`: down or
degraded, since when).
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import and_, case, func, literal, null, select
from sqlalchemy.engine import Engine

from media_crawler import errors
from media_crawler.download.ratebudget import Bucket
from media_crawler.store import schema, waits
from media_crawler.store.reports.counts import HOUR_S, _unindexed

T = schema.tasks
F = schema.feed_errors
B = schema.rate_budget

# Platform health from every signal: server-side failures (what the outage breaker
# counts) against successes, media and feed alike, over the last hour.
OUTAGE_CLASSES = tuple(sorted(error_class.value for error_class in errors.OUTAGE_CLASSES))
OUTAGE_STREAK = 3  # failures in a row, with no success since: recovery/outage.py's threshold
MOSTLY = 0.5  # "mostly fail": at least this share of the hour's outcomes failed
# A drained bucket binds only while someone is drawing on it (a take refreshes updated_at).
BUDGET_ACTIVE_S = 5.0


def platform_health(engine: Engine, now: float, platforms: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Per platform, over the last hour: auth failures, rate limited (since when, until when
    slowed), and whether its requests mostly fail server-side (platform_outage: down or
    degraded, since when). `status` is the worst: auth_failed, down, degraded,
    rate_limited, ok."""
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
    for platform, outage in platform_outage(engine, now, tuple(health)).items():
        health.setdefault(platform, _healthy()).update(outage)
    for entry in health.values():
        entry["rate_limited"] = bool(entry["rate_limited_errors_1h"] or entry["slowed_until"])
        entry["status"] = ("auth_failed" if entry["auth_failures_1h"] else
                           entry["outage_state"] if entry["outage_state"] != "ok" else
                           "rate_limited" if entry["rate_limited"] else "ok")
    return health


def _healthy() -> dict[str, Any]:
    return {"status": "ok", "rate_limited": False, "rate_limited_since": None, "rate_limited_errors_1h": 0,
            "slowed_until": None, "rate_per_s": None, "auth_failures_1h": 0, "auth_failed_since": None,
            "outage_state": "ok", "outage_since": None, "outage_failures_1h": 0, "requests_ok_1h": 0,
            "failure_ratio_1h": 0.0, "failures_since_last_success": 0, "last_success_at": None,
            "last_failure_at": None}


# Timestamps in a platform_health entry (status prints them as UTC text).
HEALTH_TIMESTAMPS = ("rate_limited_since", "slowed_until", "auth_failed_since", "outage_since", "last_success_at",
                     "last_failure_at")


def binding_budgets(engine: Engine, now: float) -> dict[str, dict[str, Any]]:
    """Platforms whose shared rate budget binds now: slowed after a 429 (until
    slow_until), or drained by workers drawing on it (less than one token, taken
    within the last BUDGET_ACTIVE_S). Their leased items wait for tokens, not threads."""
    with engine.connect() as conn:
        rows = conn.execute(select(B.c.platform, B.c.tokens, B.c.updated_at, B.c.rate, B.c.base_rate, B.c.burst,
                                   B.c.slow_until)).fetchall()
    binding = {}
    for platform, tokens, updated_at, rate, base_rate, burst, slow_until in rows:
        bucket = Bucket(tokens, updated_at, rate, base_rate, burst, slow_until or 0.0)
        slowed = bool(slow_until and slow_until > now)
        drained = bucket.refilled(now).tokens < 1.0 and now - updated_at < BUDGET_ACTIVE_S
        if slowed or drained:
            binding[platform] = {"slowed_until": slow_until if slowed else None, "drained": drained,
                                 "rate_per_s": bucket.refilled(now).rate, "base_rate_per_s": base_rate}
    return binding


def platform_outage(engine: Engine, now: float, platforms: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Per platform, over the last hour: server-side failures (5xx, timeouts, resets) of
    media downloads and feed pages, items the outage breaker handed back, against
    successful downloads and feed pages that succeeded again.

    - down: the latest OUTAGE_STREAK or more outcomes failed (no success since), and
      most of the hour's did;
    - degraded: one of the two (failing again after an hour that went mostly well,
      or recovering after an hour that mostly failed);
    - ok otherwise. `outage_since` is the first failure of the current streak (or of
      the hour when there is no streak).
    """
    since = now - HOUR_S
    outage = list(OUTAGE_CLASSES)
    successes: dict[str, tuple[int, float]] = {}
    media_failed = (select(T.c.platform, T.c.failed_at.label("at"))
                    .where(T.c.failed_at >= since, T.c.state.in_(["retry_wait", "failed"]),
                           T.c.error_class.in_(outage)))
    halted = (select(T.c.platform, T.c.wait_since.label("at"))
              .where(T.c.state == "discovered", T.c.wait_reason == waits.PLATFORM_HALTED, T.c.wait_since >= since,
                     T.c.wait_cause.in_(outage)))
    feed_failed = select(F.c.platform, F.c.at.label("at")).where(F.c.at >= since, F.c.error_class.in_(outage))
    downloaded = (select(T.c.platform, func.count(), func.max(T.c.finished_at))
                  .where(T.c.state.in_(["downloaded", "verified"]), T.c.finished_at >= since).group_by(T.c.platform))
    # By the committed_at index; the state is tested in the aggregate, or the planner may
    # prefer the state index and read every committed row of the ledger.
    downloaded_here = and_(T.c.state == "committed", T.c.finished_at >= since)
    # The group key an expression: else SQLite reads the whole table in identity-index order.
    committed = (select(_unindexed(T.c.platform), func.coalesce(func.sum(case((downloaded_here, 1), else_=0)), 0),
                        func.max(case((downloaded_here, T.c.finished_at), else_=null())))
                 .where(T.c.committed_at >= since).group_by(_unindexed(T.c.platform)))
    # Page errors a later walk resolved (an item error is resolved by every walk: no sign of health).
    feed_ok = (select(F.c.platform, func.count(), func.max(F.c.resolved_at))
               .where(F.c.resolved_at >= since, F.c.item_id.is_(None)).group_by(F.c.platform))
    with engine.connect() as conn:
        for query in (downloaded, committed, feed_ok):
            for platform, count, last in conn.execute(query):
                known = successes.get(platform, (0, 0.0))
                successes[platform] = (known[0] + count, max(known[1], float(last or 0.0)))
        failure_rows = media_failed.union_all(halted, feed_failed).subquery()
        # The latest success of the failure's platform: failures after it are the current streak.
        last_success = case(*((failure_rows.c.platform == p, ok[1]) for p, ok in successes.items()),
                            else_=0.0) if successes else literal(0.0)
        after = failure_rows.c.at > last_success
        query = (select(failure_rows.c.platform, func.count(), func.min(failure_rows.c.at), func.max(failure_rows.c.at),
                        func.sum(case((after, 1), else_=0)), func.min(case((after, failure_rows.c.at), else_=null())))
                 .group_by(failure_rows.c.platform))
        counted = {platform: (count, first, last, int(streak or 0), streak_first)
                   for platform, count, first, last, streak, streak_first in conn.execute(query)}
    result = {}
    for platform in sorted(set(platforms) | set(counted) | set(successes)):
        failed, first, last, streak, streak_first = counted.get(platform, (0, None, None, 0, None))
        ok_count, ok_last = successes.get(platform, (0, 0.0))
        total = failed + ok_count
        ratio = failed / total if total else 0.0
        in_streak = streak >= OUTAGE_STREAK
        mostly = failed >= OUTAGE_STREAK and ratio >= MOSTLY
        state = "down" if in_streak and mostly else "degraded" if in_streak or mostly else "ok"
        result[platform] = {
            "outage_state": state, "outage_since": (streak_first if in_streak else first) if state != "ok" else None,
            "outage_failures_1h": failed, "requests_ok_1h": ok_count, "failure_ratio_1h": round(ratio, 3),
            "failures_since_last_success": streak, "last_success_at": ok_last or None, "last_failure_at": last}
    return result

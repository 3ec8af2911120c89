"""How each platform is doing, from every signal the ledger holds: auth failures,
rate limits and the shared budget, server-side failures of media and feed requests.

The state is decided by the latest signals (store/reports/platform_incidents.py):
a platform is auth_failed, down, degraded or rate_limited while an incident of
that kind lasts, and a success after its failures ends it. Counts over the last
hour (failure ratio, successes) are shown beside the state, never deciding it.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import and_, case, func, null, select
from sqlalchemy.engine import Engine

from media_crawler.store import schema, waits
from media_crawler.store.rate_buckets import Bucket
from media_crawler.store.reports.counts import HOUR_S, _unindexed
from media_crawler.store.reports.platform_incidents import (AUTH, OUTAGE, OUTAGE_CLASSES, RATE_LIMITED, Incident,
                                                            latest_incidents)

T = schema.tasks
F = schema.feed_errors
B = schema.rate_budget

# A drained bucket binds only while someone is drawing on it (a take refreshes updated_at).
BUDGET_ACTIVE_S = 5.0


def platform_health(engine: Engine, now: float, platforms: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Per platform: its incidents (the latest of each kind, ongoing or ended, with since and
    until), whether an auth failure, a rate limit (or a slowed budget, while it holds) or an
    outage (down or degraded) lasts now and since when, and the last hour's outcomes.
    `status` is the worst that lasts: auth_failed, down, degraded, rate_limited, ok."""
    incidents = latest_incidents(engine, platforms)
    health = {name: _healthy() for name in platforms}
    with engine.connect() as conn:
        budgets = conn.execute(select(B.c.platform, B.c.rate, B.c.slow_until)).fetchall()
    for platform, rate, slow_until in budgets:
        if platform in health:
            health[platform]["rate_per_s"] = rate
            if slow_until and slow_until > now:
                health[platform]["slowed_until"] = slow_until
    for platform, outage in platform_outage(engine, now, tuple(health), incidents).items():
        health.setdefault(platform, _healthy()).update(outage)
    for platform, kinds in incidents.items():
        entry = health.setdefault(platform, _healthy())
        entry["incidents"] = [incident.as_dict() for _kind, incident in sorted(kinds.items())]
        auth, limited = kinds.get(AUTH), kinds.get(RATE_LIMITED)
        if auth is not None and auth.ongoing:
            entry["auth_failures"], entry["auth_failed_since"] = auth.failures, auth.since
        if limited is not None and limited.ongoing:
            entry["rate_limited_errors"], entry["rate_limited_since"] = limited.failures, limited.since
    for entry in health.values():
        # A slowed budget is a rate limit while it holds, whatever succeeded since.
        entry["rate_limited"] = bool(entry["rate_limited_errors"] or entry["slowed_until"])
        entry["status"] = ("auth_failed" if entry["auth_failures"] else
                           entry["outage_state"] if entry["outage_state"] != "ok" else
                           "rate_limited" if entry["rate_limited"] else "ok")
    return health


def _healthy() -> dict[str, Any]:
    return {"status": "ok", "rate_limited": False, "rate_limited_since": None, "rate_limited_errors": 0,
            "slowed_until": None, "rate_per_s": None, "auth_failures": 0, "auth_failed_since": None,
            "outage_state": "ok", "outage_since": None, "outage_failures_1h": 0, "requests_ok_1h": 0,
            "failure_ratio_1h": 0.0, "failures_since_last_success": 0, "last_success_at": None,
            "last_failure_at": None, "incidents": []}


# Timestamps in a platform_health entry (status prints them as UTC text), and in each of its incidents.
HEALTH_TIMESTAMPS = ("rate_limited_since", "slowed_until", "auth_failed_since", "outage_since", "last_success_at",
                     "last_failure_at")
INCIDENT_TIMESTAMPS = ("since", "until", "last_failure_at")


def health_json(entry: dict[str, Any]) -> dict[str, Any]:
    """A platform_health entry with its timestamps (its incidents' too) as UTC text."""
    from media_crawler.timestamps import utc_timestamp

    def text(values: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
        return {key: utc_timestamp(value) if key in keys and value is not None else value
                for key, value in values.items()}

    return {**text(entry, HEALTH_TIMESTAMPS),
            "incidents": [text(incident, INCIDENT_TIMESTAMPS) for incident in entry.get("incidents", [])]}


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


def platform_outage(engine: Engine, now: float, platforms: tuple[str, ...],
                    incidents: dict[str, dict[str, Incident]] | None = None) -> dict[str, dict[str, Any]]:
    """Per platform: its outage state (down, degraded or ok) from its latest outage incident
    (platform_incidents: failures in a row since the latest success; a success ends it), and
    the last hour's server-side failures (5xx, timeouts, resets, items the breaker handed
    back) against successful downloads and feed pages read again, shown beside it."""
    if incidents is None:
        incidents = latest_incidents(engine, platforms)
    hour = _hour_outcomes(engine, now)
    result = {}
    for platform in sorted(set(platforms) | set(hour) | set(incidents)):
        failed, ok_count, ok_last, last = hour.get(platform, (0, 0, None, None))
        total = failed + ok_count
        outage = incidents.get(platform, {}).get(OUTAGE)
        ongoing = outage is not None and outage.ongoing
        result[platform] = {
            "outage_state": outage.state if ongoing else "ok", "outage_since": outage.since if ongoing else None,
            "failures_since_last_success": outage.failures if ongoing else 0,
            "outage_failures_1h": failed, "requests_ok_1h": ok_count,
            "failure_ratio_1h": round(failed / total, 3) if total else 0.0,
            "last_success_at": ok_last, "last_failure_at": outage.last_failure_at if outage is not None else last}
    return result


def _hour_outcomes(engine: Engine, now: float) -> dict[str, tuple[int, int, float | None, float | None]]:
    """platform -> (server-side failures, successes, latest success, latest failure) of the last hour."""
    since = now - HOUR_S
    outage = list(OUTAGE_CLASSES)
    media_failed = (select(T.c.platform, T.c.failed_at.label("at"))
                    .where(T.c.failed_at >= since, T.c.state.in_(["retry_wait", "failed"]),
                           T.c.error_class.in_(outage)))
    halted = (select(T.c.platform, T.c.wait_since.label("at"))
              .where(T.c.state == "discovered", T.c.wait_reason == waits.PLATFORM_HALTED, T.c.wait_since >= since,
                     T.c.wait_cause.in_(outage)))
    feed_failed = (select(F.c.platform, F.c.at.label("at"))
                   .where(F.c.at >= since, F.c.error_class.in_(outage), F.c.item_id.is_(None)))
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
    successes: dict[str, tuple[int, float | None]] = {}
    with engine.connect() as conn:
        for query in (downloaded, committed, feed_ok):
            for platform, count, last in conn.execute(query):
                known, known_last = successes.get(platform, (0, None))
                latest = max((x for x in (known_last, last) if x is not None), default=None)
                successes[platform] = (known + count, latest)
        rows = media_failed.union_all(halted, feed_failed).subquery()
        failures = {platform: (count, last) for platform, count, last in conn.execute(
            select(rows.c.platform, func.count(), func.max(rows.c.at)).group_by(rows.c.platform))}
    return {platform: (failures.get(platform, (0, None))[0], successes.get(platform, (0, None))[0],
                       successes.get(platform, (0, None))[1], failures.get(platform, (0, None))[1])
            for platform in set(successes) | set(failures)}

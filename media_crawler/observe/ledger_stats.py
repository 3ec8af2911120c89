"""Numbers read from the ledger: what `status` prints and `metrics` exposes.

Every function is one or two aggregate queries (SQLAlchemy Core, SQLite and
PostgreSQL alike) taking `now` explicitly, so both commands see the same
definitions and tests need no clock. Stage delays are computed from the
per-stage timestamps the stages write (schema.tasks), each delay separately:
an average over all of them would hide which one is growing. Likewise each
unfinished row's wait has one reason (`waiting`, observe/waits.py), platform
health weighs every signal (`platform_outage`: server-side failures of media
and feed requests against successes), and `delay_histograms` gives Prometheus
cumulative histograms with fixed buckets instead of per-scrape quantiles.
"""
from __future__ import annotations

import bisect
import math
from typing import Any, Callable, Iterable

from sqlalchemy import and_, case, func, literal, null, or_, select
from sqlalchemy.engine import Engine

from media_crawler.download.ratebudget import Bucket
from media_crawler.observe import waits
from media_crawler.observe.failures import FAILED_STAGE
from media_crawler.store import schema

T = schema.tasks
F = schema.feed_errors
B = schema.rate_budget
HOUR_S = 3600.0
# Rows not finished (committed/gone): what is waiting, running or stuck.
BACKLOG_STATES = ("discovered", "downloading", "downloaded", "verified", "retry_wait", "failed")
# Every state but committed (store/ledger.py STATES).
UNCOMMITTED_STATES = (*BACKLOG_STATES, "gone")
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
# Fixed histogram buckets (seconds) for every delay and wait: from a claim taken at
# once to a partition re-requested the next day. Fixed, so Prometheus can sum them
# across instances and over time.
DELAY_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0)
# Platform health from every signal: server-side failures (what the outage breaker
# counts) against successes, media and feed alike, over the last hour.
OUTAGE_CLASSES = ("http_5xx", "network_timeout", "connection_reset")
OUTAGE_STREAK = 3  # failures in a row, with no success since: recovery/outage.py's threshold
MOSTLY = 0.5  # "mostly fail": at least this share of the hour's outcomes failed
# A drained bucket binds only while someone is drawing on it (a take refreshes updated_at).
BUDGET_ACTIVE_S = 5.0


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
    since = now - window_s
    stamps = sorted({column for _name, start, end in STAGE_DELAYS for column in (start, end)})
    # Two reads bounded by the indexes, not one full read per delay (the other stamps have
    # no index): a committed row's stamps all precede its commit (each stage stamps after
    # the one before), so its recent ones are those of a recent commit (the committed_at
    # index: the latest DELAY_SAMPLE_LIMIT of them); rows in any other state are few (the
    # state index), those with a recent stamp are read.
    committed = (select(*(T.c[name] for name in stamps)).where(T.c.committed_at >= since)
                 .order_by(T.c.committed_at.desc()).limit(DELAY_SAMPLE_LIMIT))
    others = (select(*(T.c[name] for name in stamps))
              .where(T.c.state.in_(UNCOMMITTED_STATES), or_(*(T.c[name] >= since for name in stamps))))
    with engine.connect() as conn:
        rows = [*conn.execute(committed), *conn.execute(others)]
    index = {name: position for position, name in enumerate(stamps)}
    result = {}
    for name, start, end in STAGE_DELAYS:
        begin, finish = index[start], index[end]
        pairs = [(row[finish], row[finish] - row[begin]) for row in rows
                 if row[begin] is not None and row[finish] is not None and row[finish] >= since
                 and row[finish] >= row[begin]]
        pairs.sort(key=lambda pair: pair[0], reverse=True)
        values = sorted(float(value) for _at, value in pairs[:DELAY_SAMPLE_LIMIT])
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


# -- why items wait (observe/waits.py) ------------------------------------------

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


def waiting(engine: Engine, now: float, binding_platforms: Iterable[str] = (),
            partitions: bool | Iterable[str] = True) -> list[dict[str, Any]]:
    """Every unfinished row's wait, one reason each (waits.REASONS), from its state and stamps.

    Rows: {platform, reason, source_key, day, count, since (oldest), retry_after_max,
    causes: {error_class: count}} per (platform, reason, partition, cause). Ready rows
    read `awaiting_run`; `refine_with_runs` splits them by what Dagster holds.
    partitions: True, per partition; days (the days of the partitions Dagster has a run
    queued or in flight for), per partition only for the `awaiting_run` rows of those
    days (all that refine_with_runs reads; the other rows have source_key and day None);
    False or no days, per platform, reason and cause only: a few dozen rows instead of
    one per partition with unfinished rows (tens of thousands on a large ledger, 0.3 s).
    """
    binding = sorted(set(binding_platforms))
    live = and_(T.c.lease_owner.isnot(None), T.c.lease_expires_at >= now)
    expired = and_(T.c.state == "downloading", or_(T.c.lease_expires_at.is_(None), T.c.lease_expires_at < now))
    downloading_live = and_(live, T.c.state == "downloading")
    backoff = and_(T.c.state == "retry_wait", T.c.next_attempt_at > now)
    # A halt recorded after the row's latest claim; an older one was ended by that claim.
    halted = and_(T.c.state == "discovered", T.c.wait_reason.in_(waits.HALT_REASONS),
                  T.c.wait_since >= func.coalesce(T.c.claimed_at, 0.0))
    budget = [(and_(downloading_live, T.c.platform.in_(binding)), waits.RATE_BUDGET)] if binding else []
    reason = case(
        (expired, waits.UNCERTAIN_LEASE), *budget, (live, waits.WORKER_SLOT), (T.c.state == "failed", waits.OPERATOR),
        (backoff, waits.RETRY_BACKOFF), (halted, T.c.wait_reason), else_=waits.AWAITING_RUN)
    since = case(
        (expired, func.coalesce(T.c.lease_expires_at, T.c.claimed_at, T.c.updated_at)),
        (downloading_live, func.coalesce(T.c.claimed_at, T.c.updated_at)),
        (live, T.c.updated_at),  # a verify/commit lease: claim_in_state stamps updated_at
        (or_(T.c.state == "failed", backoff), func.coalesce(T.c.failed_at, T.c.updated_at)),
        (halted, T.c.wait_since),
        # Ready since: the backoff passed, the download finished, the verify passed, it was queued.
        (T.c.state == "retry_wait", func.coalesce(T.c.next_attempt_at, T.c.failed_at, T.c.updated_at)),
        (T.c.state == "downloaded", func.coalesce(T.c.finished_at, T.c.updated_at)),
        (T.c.state == "verified", func.coalesce(T.c.verified_at, T.c.updated_at)),
        else_=func.coalesce(T.c.queued_at, T.c.discovered_at, T.c.updated_at))
    cause = case((or_(halted, backoff, T.c.state == "failed"), func.coalesce(T.c.wait_cause, T.c.error_class)),
                 else_=null())
    retry_after = case((backoff, T.c.retry_after_s), else_=null())
    if partitions is True:
        source_key, day = T.c.source_key, T.c.day
    elif partitions and (days := sorted(set(partitions))):
        refined = and_(reason == waits.AWAITING_RUN, T.c.day.in_(days))
        source_key = case((refined, T.c.source_key), else_=null())
        day = case((refined, T.c.day), else_=null())
    else:
        source_key = day = null()
    rows = (select(T.c.platform, source_key.label("source_key"), day.label("day"), reason.label("reason"),
                   since.label("since"), cause.label("cause"), retry_after.label("retry_after"))
            .where(T.c.state.in_(BACKLOG_STATES)).subquery())
    query = (select(rows.c.platform, rows.c.reason, rows.c.source_key, rows.c.day, rows.c.cause, func.count(),
                    func.min(rows.c.since), func.max(rows.c.retry_after))
             .group_by(rows.c.platform, rows.c.reason, rows.c.source_key, rows.c.day, rows.c.cause))
    with engine.connect() as conn:
        return [{"platform": platform, "reason": reason_, "source_key": source_key, "day": day, "cause": cause_,
                 "count": count, "since": since_ if since_ is not None else now, "retry_after_max": retry_max}
                for platform, reason_, source_key, day, cause_, count, since_, retry_max in conn.execute(query)]


def refine_with_runs(rows: list[dict[str, Any]], queued_partitions: set[str], running_partitions: set[str],
                     shard_of: Callable[[str], str] | None = None) -> list[dict[str, Any]]:
    """`awaiting_run` rows whose partition ('day|shard', Dagster's key; shard_of maps a
    row's source key to its shard) has a run queued become `run_queued`; with a run
    in flight, `step_pending` (rows read without their partition stay as they are)."""
    refined = []
    for row in rows:
        if row["reason"] == waits.AWAITING_RUN and row["source_key"] is not None:
            shard = shard_of(row["source_key"]) if shard_of else row["source_key"]
            partition = f"{row['day']}|{shard}"
            if partition in running_partitions:
                row = {**row, "reason": waits.STEP_PENDING}
            elif partition in queued_partitions:
                row = {**row, "reason": waits.RUN_QUEUED}
        refined.append(row)
    return refined


def summarize_waiting(rows: list[dict[str, Any]], now: float) -> dict[str, dict[str, Any]]:
    """reason -> {count, oldest_age_s, oldest_since, platforms: {platform: {count, oldest_age_s,
    oldest_since, causes?, retry_after_s_max?}}}, reasons in waits.REASONS order."""
    summary: dict[str, dict[str, Any]] = {}
    for row in rows:
        entry = summary.setdefault(row["reason"], {"count": 0, "oldest_since": row["since"], "platforms": {}})
        entry["count"] += row["count"]
        entry["oldest_since"] = min(entry["oldest_since"], row["since"])
        platform = entry["platforms"].setdefault(row["platform"], {"count": 0, "oldest_since": row["since"]})
        platform["count"] += row["count"]
        platform["oldest_since"] = min(platform["oldest_since"], row["since"])
        if row["cause"]:
            causes = platform.setdefault("causes", {})
            causes[row["cause"]] = causes.get(row["cause"], 0) + row["count"]
        if row["retry_after_max"] is not None:
            platform["retry_after_s_max"] = max(platform.get("retry_after_s_max", 0.0), float(row["retry_after_max"]))
    ordered = {}
    for reason in [*waits.REASONS, *sorted(set(summary) - set(waits.REASONS))]:
        if reason not in summary:
            continue
        entry = summary[reason]
        entry["oldest_age_s"] = round(max(now - entry["oldest_since"], 0.0), 1)
        for platform in entry["platforms"].values():
            platform["oldest_age_s"] = round(max(now - platform["oldest_since"], 0.0), 1)
        entry["platforms"] = dict(sorted(entry["platforms"].items()))
        ordered[reason] = {"count": entry["count"], "oldest_age_s": entry["oldest_age_s"],
                           "oldest_since": entry["oldest_since"], "platforms": entry["platforms"]}
    return ordered


# -- platform health from every signal ---------------------------------------------

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


# -- histograms for Prometheus (cumulative over committed items) ---------------------

# A commit's stamp is taken before its batch reaches the ledger (the commit stage applies
# a partition's rows at its end): rows stamped within this long of a scrape may still
# appear, so CommittedDelays counts them afresh on each scrape instead of folding them in.
COMMIT_SETTLE_S = 900.0
_HISTOGRAM_COLUMNS = ("platform", "queued_at", "claimed_at", "started_at", "finished_at", "verified_at", "committed_at",
                      "wait_reason", "wait_since")


def delay_histograms(engine: Engine, buckets: tuple[float, ...] = DELAY_BUCKETS, *,
                     committed_after: float | None = None,
                     committed_upto: float | None = None) -> dict[str, dict[tuple[str, str], dict]]:
    """Histograms over the committed rows (those with committed_at in (after, upto] when
    given): never windowed by age, so each bucket only grows as rows commit, as a
    Prometheus counter must (rate() and histogram_quantile() then work across instances
    and over time).

    "stage": (platform, stage) for the five stage delays; "wait": (platform, reason) for
    the wait that ended at the row's last claim, by its reason (retry_backoff,
    platform_halted, disk_guard when a stage recorded one after the row was last
    queued, else awaiting_run from queued_at), and worker_slot (claim to start).
    Each value: {"buckets": [count <= le for le in buckets], "sum": s, "count": n}.
    Rows are binned here, streamed: one pass, no aggregate per bucket in SQL.
    """
    query = select(*(T.c[name] for name in _HISTOGRAM_COLUMNS), T.c.state)
    if committed_after is None and committed_upto is None:
        query = query.where(T.c.state == "committed")
    else:
        # A window reads the committed_at index; the state is checked here, not in SQL, or the
        # planner may prefer the state index and read every committed row.
        if committed_after is not None:
            query = query.where(T.c.committed_at > committed_after)
        if committed_upto is not None:
            query = query.where(T.c.committed_at <= committed_upto)
    stage: dict[tuple[str, str], list] = {}
    wait: dict[tuple[str, str], list] = {}
    size = len(buckets)
    locate = bisect.bisect_left
    stages = tuple((name, _HISTOGRAM_COLUMNS.index(start), _HISTOGRAM_COLUMNS.index(end))
                   for name, start, end in STAGE_DELAYS)

    def observe(target: dict, key: tuple[str, str], value: float) -> None:
        entry = target.get(key)
        if entry is None:
            entry = target[key] = [[0] * (size + 1), 0.0, 0]
        entry[0][locate(buckets, value)] += 1
        entry[1] += value
        entry[2] += 1

    with engine.connect().execution_options(stream_results=True, yield_per=10_000) as conn:
        for row in conn.execute(query):
            if row[-1] != "committed":
                continue
            platform = row[0]
            for name, begin, end in stages:
                if row[begin] is not None and row[end] is not None and row[end] >= row[begin]:
                    observe(stage, (platform, name), row[end] - row[begin])
            queued, claimed, reason, since = row[1], row[2], row[7], row[8]
            if claimed is None:
                continue
            if reason is not None and since is not None and since >= (queued or 0.0) and claimed >= since:
                observe(wait, (platform, reason), claimed - since)
            elif queued is not None and claimed >= queued:
                observe(wait, (platform, waits.AWAITING_RUN), claimed - queued)

    def cumulative(entries: dict) -> dict:
        result = {}
        for key, (counts, total, count) in sorted(entries.items()):
            running, buckets_out = 0, []
            for value in counts[:size]:
                running += value
                buckets_out.append(running)
            result[key] = {"buckets": buckets_out, "sum": total, "count": count}
        return result

    result = {"stage": cumulative(stage), "wait": cumulative(wait)}
    for (platform, name), entry in result["stage"].items():
        if name == "claim":  # claimed, waiting for a worker thread: the worker_slot wait
            result["wait"][(platform, waits.WORKER_SLOT)] = entry
    result["wait"] = dict(sorted(result["wait"].items()))
    return result


def merge_histograms(*parts: dict[str, dict[tuple[str, str], dict]]) -> dict[str, dict[tuple[str, str], dict]]:
    merged: dict[str, dict[tuple[str, str], dict]] = {"stage": {}, "wait": {}}
    for part in parts:
        for kind, entries in part.items():
            for key, entry in entries.items():
                known = merged[kind].get(key)
                merged[kind][key] = entry if known is None else {
                    "buckets": [a + b for a, b in zip(known["buckets"], entry["buckets"])],
                    "sum": known["sum"] + entry["sum"], "count": known["count"] + entry["count"]}
    return {kind: dict(sorted(entries.items())) for kind, entries in merged.items()}


# Where CommittedDelays keeps its fold in the ledger (mc_cursors: a key and a text value),
# so that a new exporter, or each `metrics --once`, starts from it instead of reading
# every committed row again; FOLD_SAVE_S: how far the fold must have advanced to be saved.
FOLD_SOURCE_KEY, FOLD_NAME, FOLD_VERSION = "__metrics__", "delay_histograms", 1
FOLD_SAVE_S = 300.0
FOLD_SAVE_BUSY_MS = 2000  # SQLite: a scrape waits this long at most for the write lock, then skips the save


class CommittedDelays:
    """The exporter's delay histograms, kept across scrapes: rows committed up to
    COMMIT_SETTLE_S ago are folded in once, newer rows are counted afresh on each
    scrape. A row whose batch reaches the ledger more than COMMIT_SETTLE_S after its
    stamp is left out; one that leaves the committed state later is not taken out
    again (counters do not go down).

    The fold is kept in the ledger too (mc_cursors, FOLD_SOURCE_KEY): only the first
    scrape on a ledger reads every committed row; any later one, of this exporter, of
    another, or a `metrics --once`, reads the fold and the rows committed since it (the
    committed_at index). Every exporter folds the same rows, so they agree; a fold
    saved with other buckets or by another version is read afresh. A ledger that takes
    no write (a read-only role, a busy SQLite file) just keeps the fold in memory."""

    def __init__(self, engine: Engine, settle_s: float = COMMIT_SETTLE_S, buckets: tuple[float, ...] = DELAY_BUCKETS,
                 persist: bool = True) -> None:
        self.engine, self.settle_s, self.buckets, self.persist = engine, settle_s, buckets, persist
        self._folded: dict | None = None
        self._upto = 0.0
        self._saved_upto = 0.0

    def current(self, now: float) -> dict[str, dict[tuple[str, str], dict]]:
        upto = now - self.settle_s
        if self._folded is None and self.persist:
            stored = self._load()
            if stored is not None:
                self._folded, self._upto = stored
                self._saved_upto = self._upto
        if self._folded is None:
            self._folded, self._upto = delay_histograms(self.engine, self.buckets, committed_upto=upto), upto
        elif upto > self._upto:
            more = delay_histograms(self.engine, self.buckets, committed_after=self._upto, committed_upto=upto)
            self._folded, self._upto = merge_histograms(self._folded, more), upto
        if self.persist and (self._saved_upto == 0.0 or self._upto - self._saved_upto >= FOLD_SAVE_S):
            self._save()
        return merge_histograms(self._folded, delay_histograms(self.engine, self.buckets,
                                                               committed_after=self._upto))

    def _load(self) -> tuple[dict, float] | None:
        import json

        C = schema.cursors
        try:
            with self.engine.connect() as conn:
                value = conn.execute(select(C.c.value).where(C.c.source_key == FOLD_SOURCE_KEY,
                                                             C.c.name == FOLD_NAME)).scalar()
            if value is None:
                return None
            data = json.loads(value)
            if data.get("version") != FOLD_VERSION or tuple(data.get("buckets") or ()) != tuple(self.buckets):
                return None
            folded = {kind: {(platform, name): {"buckets": list(counts), "sum": float(total), "count": int(count)}
                             for platform, name, counts, total, count in data[kind]} for kind in ("stage", "wait")}
            return folded, float(data["upto"])
        except Exception:  # unreadable or odd: fold afresh (the fold is a cache of the ledger's rows)
            return None

    def _save(self) -> None:
        """Keep the fold, unless one saved meanwhile (by another exporter) reaches further."""
        import json

        C = schema.cursors
        value = json.dumps({"version": FOLD_VERSION, "buckets": list(self.buckets), "upto": self._upto,
                            **{kind: [[platform, name, entry["buckets"], entry["sum"], entry["count"]]
                                      for (platform, name), entry in self._folded[kind].items()]
                               for kind in ("stage", "wait")}}, separators=(",", ":"))
        where = (C.c.source_key == FOLD_SOURCE_KEY, C.c.name == FOLD_NAME)
        sqlite = self.engine.dialect.name == "sqlite"
        try:
            with self.engine.connect() as conn:
                # On the DBAPI connection: a statement through SQLAlchemy would begin (BEGIN IMMEDIATE) first.
                raw = conn.connection.dbapi_connection if sqlite else None
                if raw is not None:
                    raw.execute(f"PRAGMA busy_timeout={FOLD_SAVE_BUSY_MS}")
                try:
                    with conn.begin():
                        updated = conn.execute(C.update().where(*where, C.c.updated_at < self._upto)
                                               .values(value=value, updated_at=self._upto)).rowcount
                        if not updated and conn.execute(select(func.count()).where(*where)).scalar_one() == 0:
                            conn.execute(C.insert().values(source_key=FOLD_SOURCE_KEY, name=FOLD_NAME, value=value,
                                                           updated_at=self._upto))
                finally:
                    if raw is not None:
                        raw.execute("PRAGMA busy_timeout=30000")
            self._saved_upto = self._upto
        except Exception:  # read-only, locked, or two first scrapes inserting at once: keep it in memory
            self._saved_upto = self._upto  # tried: the next try when the fold has advanced again


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


def partition_days(*partition_sets: Iterable[str]) -> set[str]:
    """The days of Dagster partition keys ('day|shard'): what `waiting(partitions=...)` reads per partition."""
    return {key.split("|", 1)[0] for keys in partition_sets for key in keys}

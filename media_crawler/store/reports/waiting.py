"""Why every unfinished row waits (store/waits.py names the reasons), read in one
grouped query: per platform, reason and cause, and per partition where asked."""
from __future__ import annotations

from typing import Any, Iterable

from sqlalchemy import and_, case, func, null, or_, select
from sqlalchemy.engine import Engine

from media_crawler.store import schema, waits
from media_crawler.store.reports.counts import BACKLOG_STATES

T = schema.tasks

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

"""Platform incidents: the latest signals decide, not a count over a time window.

A platform is in an incident of a kind (auth, rate_limited, outage) while its
latest failure of that kind is newer than its latest success. Any success after
them ends it: a feed walk that finished, a feed page that read again, a media
item downloaded or committed. So once a credential is renewed and `rerun-failed`
succeeds, the incident has an end (`until`) and `status`, `health --ready`,
`metrics` and the alerts built on them say ok again, at once, not an hour later.

Failures are what the ledger still holds as failing: items in retry_wait or
failed, items the outage breaker or an auth halt handed back (discovered,
platform_halted), and feed pages that failed (kept after a later walk resolves
them: they are the incident's history). An item that later succeeded no longer
reads as a failure, so an ended incident's `since` is the earliest failure the
ledger still holds for it.

An outage needs OUTAGE_STREAK server-side failures in a row, no success since
(what the outage breaker acts on, download/outage.py); fewer are what an item's
retries are for. It is `down` when its failures are at least as many as the
platform's successes in the hour before it began, `degraded` when they are
fewer (failing after going mostly well). That hour only weighs an incident
while it lasts; it never keeps one open.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection, Engine

from media_crawler import errors
from media_crawler.store import schema, waits
from media_crawler.store.reports.counts import _unindexed

T = schema.tasks
F = schema.feed_errors
D = schema.source_days
S = schema.sources

AUTH, RATE_LIMITED, OUTAGE = "auth", "rate_limited", "outage"
# Error classes of each incident kind. The outage classes are the breaker's (errors.OUTAGE_CLASSES).
OUTAGE_CLASSES = tuple(sorted(error_class.value for error_class in errors.OUTAGE_CLASSES))
KIND_OF = {"auth": AUTH, "rate_limited": RATE_LIMITED, **{name: OUTAGE for name in OUTAGE_CLASSES}}
OUTAGE_STREAK = 3  # server-side failures in a row, no success since: download/outage.py's threshold
MOSTLY = 0.5  # down when at least this share of the incident and the hour before it failed
LOOKBACK_S = 3600.0  # the successes before an outage that weigh it (down or degraded)


@dataclass(frozen=True)
class Incident:
    """One stretch of failures of one kind on one platform; `until` is None while it lasts."""

    platform: str
    kind: str  # auth, rate_limited, outage
    state: str  # the health it means: auth_failed, rate_limited, down, degraded
    since: float  # the earliest failure of the stretch the ledger still holds
    until: float | None  # the first success after its latest failure; None: ongoing
    failures: int  # failures of the stretch the ledger still holds
    last_failure_at: float

    @property
    def ongoing(self) -> bool:
        return self.until is None

    def as_dict(self) -> dict[str, Any]:
        return {"platform": self.platform, "kind": self.kind, "state": self.state, "since": self.since,
                "until": self.until, "ongoing": self.ongoing, "failures": self.failures,
                "last_failure_at": self.last_failure_at}


def latest_incidents(engine: Engine, platforms: tuple[str, ...]) -> dict[str, dict[str, Incident]]:
    """Per platform, its latest incident of each kind it ever had (ongoing or ended), by kind."""
    result: dict[str, dict[str, Incident]] = {name: {} for name in platforms}
    with engine.connect() as conn:
        for platform, kinds in sorted(_failure_times(conn).items()):
            earliest = min(times[0] for times in kinds.values())
            last_success = _success_edge(conn, platform, earliest, None, latest=True)
            found = result.setdefault(platform, {})
            for kind, times in sorted(kinds.items()):
                incident = _incident(conn, platform, kind, times, last_success)
                if incident.kind != OUTAGE or incident.failures >= OUTAGE_STREAK:
                    found[kind] = incident  # a server-side failure or two is what an item's retries are for
    return result


def _incident(conn: Connection, platform: str, kind: str, times: list[float],
              last_success: float | None) -> Incident:
    """The stretch of `times` (the kind's failures, sorted) that ends with the latest one."""
    last = times[-1]
    if last_success is None or last_success < last:
        after, until = last_success, None  # ongoing: the failures after the latest success
    else:
        # Ended by the first success after its latest failure; it began after the success before that.
        until = _success_edge(conn, platform, last, None, latest=False)
        after = _success_edge(conn, platform, times[0], last, latest=True)
    stretch = times[bisect_right(times, after):] if after is not None else times
    return Incident(platform, kind, _state(conn, platform, kind, stretch[0], len(stretch)), stretch[0], until,
                    len(stretch), last)


def _state(conn: Connection, platform: str, kind: str, since: float, failures: int) -> str:
    if kind == AUTH:
        return "auth_failed"
    if kind == RATE_LIMITED:
        return "rate_limited"
    if failures < OUTAGE_STREAK:
        return "degraded"  # not reported (latest_incidents): spares the count below
    ok_before = _success_count(conn, platform, since - LOOKBACK_S, since)
    return "down" if failures / (failures + ok_before) >= MOSTLY else "degraded"


def _failure_times(conn: Connection) -> dict[str, dict[str, list[float]]]:
    """platform -> kind -> the times of its failures the ledger holds, sorted. Read once: the
    rows still failing are the unfinished share of the ledger (the state index finds them)."""
    classes = list(KIND_OF)
    failed = (select(T.c.platform, T.c.error_class.label("error_class"), T.c.failed_at.label("at"))
              .where(T.c.state.in_(["retry_wait", "failed"]), T.c.error_class.in_(classes),
                     T.c.failed_at.is_not(None)))
    halted = (select(T.c.platform, T.c.wait_cause.label("error_class"), T.c.wait_since.label("at"))
              .where(T.c.state == "discovered", T.c.wait_reason == waits.PLATFORM_HALTED,
                     T.c.wait_cause.in_(classes), T.c.wait_since.is_not(None)))
    # Page-level feed errors, resolved or not: a resolved one is an ended incident's history.
    pages = (select(F.c.platform, F.c.error_class.label("error_class"), F.c.at.label("at"))
             .where(F.c.item_id.is_(None), F.c.error_class.in_(classes)))
    found: dict[str, dict[str, list[float]]] = {}
    for platform, error_class, at in conn.execute(failed.union_all(halted, pages)):
        found.setdefault(platform, {}).setdefault(KIND_OF[error_class], []).append(at)
    for kinds in found.values():
        for times in kinds.values():
            times.sort()
    return found


def _success_sources(platform: str):
    """(time column, conditions) of each kind of success of the platform: items downloaded or
    committed, feed pages a later walk read, feed walks that finished."""
    # The platform compared as an expression: else SQLite walks the identity index by platform
    # (every row of it) instead of the committed_at index from the time bound.
    return [
        (T.c.committed_at, [_unindexed(T.c.platform) == platform], None),
        (T.c.finished_at, [T.c.state.in_(["downloaded", "verified"]), T.c.platform == platform], None),
        (F.c.resolved_at, [F.c.platform == platform, F.c.item_id.is_(None)], None),
        (D.c.feed_done_at, [S.c.platform == platform], D.join(S, S.c.source_key == D.c.source_key)),
    ]


def _window(column, after: float, before: float | None) -> list:
    return [column > after] + ([column < before] if before is not None else [])


def _success_edge(conn: Connection, platform: str, after: float, before: float | None,
                  latest: bool) -> float | None:
    """The latest (or earliest) success of the platform in (after, before). ORDER BY the time
    and LIMIT 1, so the committed_at index is walked from the bound and stops at the first
    row of the platform (an aggregate would read every commit of the range)."""
    found = []
    for column, conditions, joined in _success_sources(platform):
        query = select(column).where(*conditions, *_window(column, after, before))
        if joined is not None:
            query = query.select_from(joined)
        value = conn.execute(query.order_by(column.desc() if latest else column.asc()).limit(1)).scalar()
        if value is not None:
            found.append(value)
    if not found:
        return None
    return max(found) if latest else min(found)


def _success_count(conn: Connection, platform: str, after: float, before: float) -> int:
    """Successes of the platform in (after, before): a bounded range (LOOKBACK_S)."""
    total = 0
    for column, conditions, joined in _success_sources(platform):
        query = select(func.count()).where(*conditions, *_window(column, after, before))
        if joined is not None:
            query = query.select_from(joined)
        total += conn.execute(query).scalar() or 0
    return total

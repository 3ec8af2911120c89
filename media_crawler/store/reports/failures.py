"""What is failing, where, since when: the ledger's failures grouped for a person on call.

Item failures come from `mc_tasks` (state retry_wait, failed or gone), page
failures from `mc_feed_errors` (stage `fetch`, not yet resolved by a later
successful page). Groups are (platform, stage, error_class) and split in two:
`retrying` (retry_wait: a later attempt is scheduled) and `gave_up` (failed,
gone, and feed pages that failed their partition). Aggregates are computed in
SQL, so a million failed rows cost one GROUP BY, not a million Python objects.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, case, func, or_, select
from sqlalchemy.engine import Engine

from media_crawler.timestamps import utc_timestamp
from media_crawler.scrub import scrub_url
from media_crawler.shown import clipped
from media_crawler.store import schema

T = schema.tasks
F = schema.feed_errors
RETRY_WAIT, FAILED, GONE = "retry_wait", "failed", "gone"
SAMPLE_URLS = 3
SAMPLE_RUNS = 5
SAMPLE_CHARS = 300  # of a group's sample reason, cut in the middle: its cause is often at the end

# The ledger keeps no stage column, but each stage stamps its own time: a row
# whose failure came after its latest verify (of this claim) failed at commit,
# after its latest download finish at verify, else at download.
_THIS_CLAIM_VERIFIED = and_(T.c.verified_at.isnot(None), T.c.failed_at >= T.c.verified_at,
                            or_(T.c.claimed_at.is_(None), T.c.verified_at >= T.c.claimed_at))
_THIS_CLAIM_FINISHED = and_(T.c.finished_at.isnot(None), T.c.failed_at >= T.c.finished_at,
                            or_(T.c.claimed_at.is_(None), T.c.finished_at >= T.c.claimed_at))
FAILED_STAGE = case((_THIS_CLAIM_VERIFIED, "commit"), (_THIS_CLAIM_FINISHED, "verify"), else_="download")


@dataclass
class FailureGroup:
    platform: str
    stage: str
    error_class: str
    status: str  # "retrying" or "gave_up"
    count: int
    first_seen: float
    last_seen: float
    states: dict[str, int] = field(default_factory=dict)
    canonical_urls: list[str] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    sample_message: str | None = None
    next_retry_at: float | None = None

    def as_json(self) -> dict[str, Any]:
        data = {"platform": self.platform, "stage": self.stage, "error_class": self.error_class,
                "count": self.count, "states": self.states, "first_seen": utc_timestamp(self.first_seen),
                "last_seen": utc_timestamp(self.last_seen), "canonical_urls": self.canonical_urls,
                "run_ids": self.run_ids, "sample_message": self.sample_message}
        if self.next_retry_at is not None:
            data["next_retry_at"] = utc_timestamp(self.next_retry_at)
        return data


@dataclass
class FailureReport:
    generated_at: float
    since: float | None
    platform: str | None
    retrying: list[FailureGroup]
    gave_up: list[FailureGroup]
    # Totals over every group, and groups left out of the lists by `limit` (most recent first).
    totals: dict[str, int] = field(default_factory=dict)
    omitted: dict[str, int] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        totals = self.totals or {"retrying": sum(g.count for g in self.retrying),
                                 "gave_up": sum(g.count for g in self.gave_up)}
        return {
            "generated_at": utc_timestamp(self.generated_at),
            "since": utc_timestamp(self.since) if self.since is not None else None,
            "platform": self.platform,
            "totals": totals,
            "retrying": [group.as_json() for group in self.retrying],
            "gave_up": [group.as_json() for group in self.gave_up],
            "omitted_groups": {"retrying": self.omitted.get("retrying", 0), "gave_up": self.omitted.get("gave_up", 0)},
        }


def failure_report(engine: Engine, *, now: float, since: float | None = None, platform: str | None = None,
                   limit: int | None = None) -> FailureReport:
    """limit: at most this many groups per section (the most recent), the others counted in `omitted`."""
    groups = _item_groups(engine, since, platform) + _feed_groups(engine, since, platform)
    order = lambda group: (-group.last_seen, group.platform, group.stage, group.error_class)  # noqa: E731
    sections = {status: sorted((g for g in groups if g.status == status), key=order)
                for status in ("retrying", "gave_up")}
    totals = {status: sum(g.count for g in found) for status, found in sections.items()}
    omitted = {}
    if limit is not None and limit > 0:
        omitted = {status: max(len(found) - limit, 0) for status, found in sections.items()}
        sections = {status: found[:limit] for status, found in sections.items()}
    return FailureReport(generated_at=now, since=since, platform=platform, retrying=sections["retrying"],
                         gave_up=sections["gave_up"], totals=totals, omitted=omitted)


def _item_filters(since: float | None, platform: str | None) -> list:
    filters = [T.c.state.in_([RETRY_WAIT, FAILED, GONE])]
    if since is not None:
        filters.append(T.c.failed_at >= since)
    if platform:
        filters.append(T.c.platform == platform)
    return filters


_ERROR_CLASS = func.coalesce(T.c.error_class, "unknown")
_STATUS = case((T.c.state == RETRY_WAIT, "retrying"), else_="gave_up")


def _item_groups(engine: Engine, since: float | None, platform: str | None) -> list[FailureGroup]:
    stage = FAILED_STAGE.label("stage")
    error_class = _ERROR_CLASS.label("error_class")
    status = _STATUS.label("status")
    filters = _item_filters(since, platform)
    query = (select(T.c.platform, stage, error_class, status, T.c.state, func.count().label("n"),
                    func.min(T.c.failed_at), func.max(T.c.failed_at), func.min(T.c.next_attempt_at))
             .where(*filters)
             .group_by(T.c.platform, stage, error_class, status, T.c.state))
    merged: dict[tuple, FailureGroup] = {}
    with engine.connect() as conn:
        for row in conn.execute(query):
            key = (row.platform, row.stage, row.error_class, row.status)
            first, last = row[6] or 0.0, row[7] or 0.0
            group = merged.get(key)
            if group is None:
                group = merged[key] = FailureGroup(*key, count=0, first_seen=first, last_seen=last)
            group.count += row.n
            group.states[row.state] = row.n
            group.first_seen, group.last_seen = min(group.first_seen, first), max(group.last_seen, last)
            if row[8] is not None and row.status == "retrying":
                group.next_retry_at = row[8]
        if merged:
            _fill_item_samples(conn, merged, filters)
    return list(merged.values())


def _fill_item_samples(conn, groups: dict[tuple, FailureGroup], filters: list) -> None:
    """The most recent canonical URLs, run ids and one message of every group: two windowed
    queries over the failing rows in all, not two per group (each of which read them all)."""
    key = (T.c.platform, FAILED_STAGE, _ERROR_CLASS, _STATUS)
    recent = (select(*(column.label(f"k{n}") for n, column in enumerate(key)), T.c.canonical_url, T.c.error_message,
                     func.row_number().over(partition_by=key, order_by=(T.c.failed_at.desc(), T.c.id.desc()))
                     .label("rank"))
              .where(*filters).subquery())
    rows = conn.execute(select(recent).where(recent.c.rank <= SAMPLE_URLS)
                        .order_by(recent.c.k0, recent.c.k1, recent.c.k2, recent.c.k3, recent.c.rank)).fetchall()
    samples: dict[tuple, list] = {}
    for row in rows:
        samples.setdefault(tuple(row[:4]), []).append(row)
    # The runs of the group's most recent failures, up to SAMPLE_RUNS of them.
    per_run = (select(*(column.label(f"k{n}") for n, column in enumerate(key)), T.c.run_id,
                      func.max(T.c.failed_at).label("last"))
               .where(*filters, T.c.run_id.isnot(None)).group_by(*key, T.c.run_id).subquery())
    ranked = select(per_run, func.row_number().over(
        partition_by=(per_run.c.k0, per_run.c.k1, per_run.c.k2, per_run.c.k3),
        order_by=(per_run.c.last.desc(), per_run.c.run_id)).label("rank")).subquery()
    runs: dict[tuple, list[str]] = {}
    for row in conn.execute(select(ranked.c.k0, ranked.c.k1, ranked.c.k2, ranked.c.k3, ranked.c.run_id)
                            .where(ranked.c.rank <= SAMPLE_RUNS)):
        runs.setdefault(tuple(row[:4]), []).append(row.run_id)
    for group_key, group in groups.items():
        found = samples.get(group_key, [])
        group.canonical_urls = [scrub_url(row.canonical_url) for row in found]
        group.sample_message = next((clipped(row.error_message, SAMPLE_CHARS) for row in found if row.error_message), None)
        group.run_ids = sorted(runs.get(group_key, []))


def _feed_groups(engine: Engine, since: float | None, platform: str | None) -> list[FailureGroup]:
    """Unresolved page failures: the partition's feed has not succeeded since."""
    filters = [F.c.resolved_at.is_(None)]
    if since is not None:
        filters.append(F.c.at >= since)
    if platform:
        filters.append(F.c.platform == platform)
    query = (select(F.c.platform, F.c.error_class, func.count(), func.min(F.c.at), func.max(F.c.at))
             .where(*filters).group_by(F.c.platform, F.c.error_class))
    key = (F.c.platform, F.c.error_class)
    # The 20 latest pages of each group (their partitions, once each, give the samples) and
    # the runs of its latest failures: one windowed query each, not two per group.
    recent = (select(F.c.platform, F.c.error_class, F.c.source_key, F.c.day, F.c.message,
                     func.row_number().over(partition_by=key, order_by=(F.c.at.desc(), F.c.id.desc())).label("rank"))
              .where(*filters).subquery())
    per_run = (select(F.c.platform, F.c.error_class, F.c.run_id, func.max(F.c.at).label("last"))
               .where(*filters, F.c.run_id.isnot(None)).group_by(*key, F.c.run_id).subquery())
    ranked = select(per_run, func.row_number().over(
        partition_by=(per_run.c.platform, per_run.c.error_class),
        order_by=(per_run.c.last.desc(), per_run.c.run_id)).label("rank")).subquery()
    groups = []
    with engine.connect() as conn:
        found = conn.execute(query).fetchall()
        if not found:
            return groups
        pages: dict[tuple, list] = {}
        for row in conn.execute(select(recent).where(recent.c.rank <= 20).order_by(
                recent.c.platform, recent.c.error_class, recent.c.rank)):
            pages.setdefault((row.platform, row.error_class), []).append(row)
        runs: dict[tuple, list[str]] = {}
        for row in conn.execute(select(ranked.c.platform, ranked.c.error_class, ranked.c.run_id)
                                .where(ranked.c.rank <= SAMPLE_RUNS)):
            runs.setdefault((row.platform, row.error_class), []).append(row.run_id)
    for platform_name, error_class, count, first, last in found:
        group = FailureGroup(platform_name, "fetch", error_class, "gave_up", count, first, last, {"page": count})
        rows = pages.get((platform_name, error_class), [])
        # A page has no item URL: name the partition (source and day) instead, once each.
        group.canonical_urls = list(dict.fromkeys(f"{row.source_key} {row.day}" for row in rows))[:SAMPLE_URLS]
        group.sample_message = next((clipped(row.message, SAMPLE_CHARS) for row in rows if row.message), None)
        group.run_ids = sorted(runs.get((platform_name, error_class), []))
        groups.append(group)
    return groups

"""How long items spend between stages, from the per-stage timestamps the stages
write (schema.tasks), each delay separately: an average over all of them would
hide which one is growing. `stage_delays` gives percentiles over the last day for
`status`; `delay_histograms` gives Prometheus cumulative histograms with fixed
buckets (store/reports/delay_fold.py keeps them across scrapes).
"""
from __future__ import annotations

import bisect
import math
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.engine import Engine

from media_crawler.store import schema, waits
from media_crawler.store.reports.counts import HOUR_S, UNCOMMITTED_STATES

T = schema.tasks

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


def committed_at_of_row(engine: Engine, *, after: float | None, row: int) -> float | None:
    """The commit time of the `row`-th row committed after `after` (all when None), by the
    committed_at index; None when fewer remain. A fold up to it reads about `row` rows."""
    query = select(T.c.committed_at).where(T.c.committed_at > after if after is not None else T.c.committed_at.isnot(None))
    with engine.connect() as conn:
        return conn.execute(query.order_by(T.c.committed_at).limit(1).offset(row - 1)).scalar()


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

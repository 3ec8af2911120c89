"""bench/scale.py's figures from Dagster's event log and the ledger: per run (queue wait,
wall, steps, first item, event rows), claim latency, the claim and sensor queries."""
from __future__ import annotations

import statistics
import time
from collections import defaultdict
from pathlib import Path

# The engine event a run worker writes once its process is up, its instance built, before it
# loads the code location (dagster/_grpc/impl.py, _run_in_subprocess).
WORKER_STARTED = "Started process for run"


def run_figures(instance, runs, ledger_rows: dict) -> list[dict]:
    """Per run: queue wait, wall (STARTING -> SUCCESS), steps' time, first item, event-log rows."""
    from dagster import DagsterEventType

    from media_crawler.shards import partitions_of_run

    out = []
    for run in runs:
        records = instance.get_records_for_run(run.run_id, limit=1_000_000).records
        ts: dict[str, float] = {}
        steps: dict[str, dict[str, float]] = defaultdict(dict)
        for record in records:
            entry = record.event_log_entry
            event = entry.dagster_event
            if event is None:
                continue
            kind = event.event_type
            if kind in (DagsterEventType.RUN_ENQUEUED, DagsterEventType.RUN_STARTING, DagsterEventType.RUN_START,
                        DagsterEventType.RUN_SUCCESS, DagsterEventType.RUN_FAILURE):
                ts.setdefault(kind.value, entry.timestamp)
            elif kind in (DagsterEventType.STEP_START, DagsterEventType.STEP_SUCCESS, DagsterEventType.STEP_FAILURE):
                steps[event.step_key].setdefault(kind.value, entry.timestamp)
            elif kind == DagsterEventType.ENGINE_EVENT and (event.message or "").startswith(WORKER_STARTED):
                ts.setdefault(WORKER_STARTED, entry.timestamp)
        start = ts.get("PIPELINE_STARTING") or ts.get("PIPELINE_START")
        end = ts.get("PIPELINE_SUCCESS") or ts.get("PIPELINE_FAILURE")
        step_s = sum(s.get("STEP_SUCCESS", s.get("STEP_FAILURE", 0)) - s["STEP_START"] for s in steps.values()
                     if "STEP_START" in s)
        row = ledger_rows.get(run.run_id, {})
        wall = (end - start) if start and end else None
        spans = sorted((s["STEP_START"], s.get("STEP_SUCCESS", s.get("STEP_FAILURE", s["STEP_START"])))
                       for s in steps.values() if "STEP_START" in s)
        out.append(dict(
            run_id=run.run_id, partition=run.tags.get("dagster/partition"), partitions=partitions_of_run(run.tags),
            status=run.status.value,
            items=row.get("items", 0), events=len(records),
            queued_s=(start - ts["PIPELINE_ENQUEUED"]) if start and "PIPELINE_ENQUEUED" in ts else None,
            wall_s=wall, steps_s=step_s,
            step_s_by_key={key: round(s.get("STEP_SUCCESS", s.get("STEP_FAILURE", 0)) - s["STEP_START"], 2)
                           for key, s in steps.items() if "STEP_START" in s},
            to_first_item_s=(row["first"] - start) if start and row.get("first") else None,
            dagster_share=(1 - step_s / wall) if wall else None,
            outside_items_share=((wall - (row["last"] - row["first"])) / wall) if wall and row.get("first") else None,
            start=start, end=end,
            # Where the time outside the steps goes: the run worker's start (process, imports,
            # code location) up to RUN_START, then up to the first step, between steps, after the last.
            outside_steps=_outside_steps(start, ts.get(WORKER_STARTED), ts.get("PIPELINE_START"), spans, end),
        ))
    return out


def _outside_steps(starting, worker_started, started, spans, end) -> dict | None:
    if not (starting and started and spans and end):
        return None
    between = sum(max(0.0, later[0] - earlier[1]) for earlier, later in zip(spans, spans[1:]))
    return dict(launch_s=started - starting,
                # The launch in two: the worker's process, its imports and the instance (Dagster's),
                # then loading the code location and the job up to RUN_START.
                worker_start_s=(worker_started - starting) if worker_started else None,
                code_location_s=(started - worker_started) if worker_started else None,
                to_first_step_s=spans[0][0] - started,
                between_steps_s=between, after_last_step_s=end - spans[-1][1])


def ledger_by_run(engine) -> dict:
    from sqlalchemy import text

    with engine.connect() as conn:
        rows = conn.execute(text(
            "select run_id, count(*), min(discovered_at), max(coalesce(committed_at, finished_at, discovered_at)) "
            "from mc_tasks group by run_id")).fetchall()
    return {r[0]: dict(items=r[1], first=r[2], last=r[3]) for r in rows}


def ledger_rows_of_runs(engine) -> dict:
    """Items per run by the run that committed them (rows carry the last run that worked on them)."""
    return ledger_by_run(engine)


def claim_latency(engine) -> dict:
    from sqlalchemy import text

    with engine.connect() as conn:
        deltas = [r[0] for r in conn.execute(text(
            "select claimed_at - discovered_at from mc_tasks where claimed_at is not null order by 1")).fetchall()]
        state = dict(conn.execute(text("select state, count(*) from mc_tasks group by state")).fetchall())
    p95 = deltas[int(0.95 * (len(deltas) - 1))] if deltas else None
    return dict(claimed_minus_discovered_p95_s=p95, claimed_minus_discovered_p50_s=statistics.median(deltas) if deltas else None,
                states=state)


def claim_query_timing(config_path: Path, days: list[str], repeat: int = 5) -> dict:
    """Time Ledger.claim itself, as download_partition calls it, on the finished ledger
    (every row committed: the query's cost on a ledger of this size, nothing to lease)."""
    from media_crawler.config import load_config
    from media_crawler.models import Lease
    from media_crawler.store.ledger import Ledger
    from media_crawler.store.leases import claim_downloads

    config = load_config(config_path)
    ledger = Ledger(config.ledger_url)
    groups = config.layout.group(source.key for source in config.sources)
    times = []
    for shard, keys in groups.items():
        for day in days:
            for _ in range(repeat):
                t = time.perf_counter()
                claim_downloads(ledger, source_key=keys, day=day, lease=Lease("bench-scale", 1.0))
                times.append(time.perf_counter() - t)
    times.sort()
    return dict(claim_query_p95_ms=1000 * times[int(0.95 * (len(times) - 1))], claim_query_p50_ms=1000 * statistics.median(times),
                claim_query_n=len(times), sources_per_claim=max(len(v) for v in groups.values()))


def unfinished_sensor_query(config_path: Path) -> float:
    """The first unfinished-partitions query after the crawl, as a sensor tick makes it: the
    query (and its compile, 0.5-0.7 ms), on the engine claim_query_timing already connected;
    the connection and the schema check are Ledger()'s, before the clock starts (50-90 ms on
    a fresh engine, bench/unfinished_query.py). On a ledger autovacuum has not reached, the
    first query after many row moves pays once for the dead index entries it meets."""
    from media_crawler.config import load_config
    from media_crawler.store.reports.reads import unfinished_partition_counts as unfinished_partitions
    from media_crawler.store.ledger import Ledger

    ledger = Ledger(load_config(config_path).ledger_url)
    t = time.perf_counter()
    unfinished_partitions(ledger)
    return (time.perf_counter() - t) * 1000


"""What a Dagster run worker pays before its run starts, by part, and how much of it is the
start method: spawned, as Dagster's code server does, against forked from a forkserver that
has already imported Dagster (which Dagster does not offer for run workers).

Why: on the production path the launch (RUN_STARTING -> RUN_START) is the whole of Dagster's
share of a partition's wall time (bench/SCALE.md). The event log puts the worker's own
"Started process for run" engine event 1.7-3.6 s after RUN_STARTING on a slow host, and
RUN_START 0.3-0.6 s after that. This splits the first part.

Workload: each round starts one child per side, interleaved (spawn, forkserver, spawn, ...),
so both sides see the same moments of the machine. A child does what
`dagster._grpc.impl._run_in_subprocess` does before its run begins: import the module of its
target, build the instance from an InstanceRef (dagster-postgres on a fresh database on
127.0.0.1:5432), read the run storage once, then load the code location
(`media_crawler.definitions.defs()`, the demo's sources.yaml unless MEDIA_CRAWLER_CONFIG says
otherwise). Times are from the parent's `Process.start()`; the forkserver's own start is paid
once, before the first round, as it would be once per code server. `to_child_s` is the
interpreter's start and the unpickling of the target, which imports its module (most of
Dagster); `instance_s` includes importing dagster-postgres, SQLAlchemy and alembic.

    .venv/bin/python -m bench run_worker_start [--rounds 8]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

# What Dagster's code server has imported by the time it starts a run worker, minus user code:
# the target's module and the run storage's.
PRELOAD = ["dagster._grpc.impl", "dagster_postgres"]


def run_worker_setup(started_at: float, instance_ref, report) -> None:
    t0 = time.time()
    import dagster._grpc.impl  # noqa: F401  the module of the code server's target
    from dagster import DagsterInstance
    t1 = time.time()
    instance = DagsterInstance.from_ref(instance_ref)
    instance.get_run_by_id("00000000-0000-0000-0000-000000000000")
    t2 = time.time()
    import media_crawler.definitions as definitions
    definitions.defs()
    t3 = time.time()
    report.put(dict(to_child_s=t0 - started_at, imports_s=t1 - t0, instance_s=t2 - t1,
                    code_location_s=t3 - t2, ready_s=t3 - started_at))


def start_one(context, instance_ref) -> dict:
    report = context.Queue()
    started_at = time.time()
    process = context.Process(target=run_worker_setup, args=(started_at, instance_ref, report))
    process.start()
    result = report.get(timeout=120)
    process.join()
    return result


def main(argv=None) -> int:
    from dagster._core.instance.ref import InstanceRef
    from bench.instruments import load_1min
    from bench.scale import speed_probe_ms
    from bench.scale_postgres import createdb, dropdb

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args(argv)
    db, url = createdb()
    try:
        with tempfile.TemporaryDirectory(prefix="run-worker-start-") as home:
            Path(home, "dagster.yaml").write_text(
                f"storage:\n  postgres:\n    postgres_url: {url}\ntelemetry:\n  enabled: false\n")
            os.environ["DAGSTER_HOME"] = home
            ref = InstanceRef.from_dir(home)
            from dagster import DagsterInstance
            DagsterInstance.from_ref(ref).dispose()  # creates the tables once, outside the rounds
            spawn = multiprocessing.get_context("spawn")
            forkserver = multiprocessing.get_context("forkserver")
            forkserver.set_forkserver_preload(PRELOAD)
            warm = forkserver.Process(target=time.sleep, args=(0,))
            warm.start()
            warm.join()
            probe_before = speed_probe_ms()
            sides: dict[str, list[dict]] = {"spawn": [], "forkserver": []}
            for _ in range(args.rounds):
                sides["spawn"].append(start_one(spawn, ref))
                sides["forkserver"].append(start_one(forkserver, ref))
            result: dict = dict(rounds=args.rounds, preload=PRELOAD, cpus=os.cpu_count(),
                                load_1min=round(load_1min(), 2),
                                speed_probe_ms=[probe_before, speed_probe_ms()])
            for side, runs in sides.items():
                for key in runs[0]:
                    result[f"{side}_{key}_median"] = round(statistics.median(run[key] for run in runs), 3)
                result[f"{side}_ready_s_max"] = round(max(run["ready_s"] for run in runs), 3)
            result["ready_ratio_forkserver_over_spawn"] = round(
                result["forkserver_ready_s_median"] / result["spawn_ready_s_median"], 3)
            print(json.dumps(result, indent=1))
    finally:
        dropdb(db)
    return 0


if __name__ == "__main__":
    sys.exit(main())

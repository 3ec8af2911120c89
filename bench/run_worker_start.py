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

`--celery` measures the CeleryRunLauncher's run worker instead (section below): real ranged runs
executed one after another in one forked pool process, the first of them cold, the others warm;
`--preload` has the pool's parent import deploy/celery_run_launcher.yaml's `imports` first.

    .venv/bin/python -m bench run_worker_start --celery [--preload] [--rounds 8] [--sources 1280]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--celery", action="store_true", help="the CeleryRunLauncher path (below) instead")
    parser.add_argument("--preload", action="store_true",
                        help="--celery: the worker's parent imports the launcher's `imports` first")
    parser.add_argument("--no-autocreate", action="store_true",
                        help="--celery: the instance with `should_autocreate_tables: false` once the tables exist")
    parser.add_argument("--sources", type=int, default=CELERY_SOURCES, help="--celery: sources in sources.yaml")
    args = parser.parse_args(argv)
    if args.celery:
        return celery_main(args)  # before any import below: its pool process must start as a worker's would
    from dagster._core.instance.ref import InstanceRef
    from bench.instruments import load_1min
    from bench.scale import speed_probe_ms
    from bench.scale_postgres import createdb, dropdb

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


# --- the Celery path (--celery) -----------------------------------------------------------
#
# What a CeleryRunLauncher run worker does per run, without the broker: a process forked from
# a parent that imported what `celery -A dagster_celery.app worker` imports before it forks its
# pool (plus, with --preload, the modules of the launcher's `imports`), then calls dagster_celery's
# execute_job task in-process, as the pool process does, for one run after another. Each run is a
# real ranged run of the crawl job (4 shards of a platform without sources, so the steps find no
# work and no request leaves the machine) on PostgreSQL, with deploy/dagster.postgres.yaml
# rendered for 4 workers and deploy/celery_run_launcher.yaml merged in. Per run: the task's call
# to its "Started process for run" event (the instance, the run read) and from there to RUN_START
# (the code location, the job, the execution plan), and the pool process's CPU seconds.

CELERY_SOURCES = 1280  # the 10k rows' sources
RUN_SHARDS = ["urls-s00", "urls-s01", "urls-s02", "urls-s03"]
RUN_DAY = "2026-11-27"


def celery_sources_yaml(count: int) -> str:
    platforms = ("bilibili", "weibo", "facebook")  # none on `urls`: the runs' shards hold no source
    lines = ["partitions:", "  start_day: '2026-01-01'",
             "  shards: {bilibili: 12, weibo: 4, facebook: 4, urls: 4}", "  shards_per_run: 4", "sources:"]
    for index in range(count):
        platform = platforms[index % 3]
        kind = "page" if platform == "facebook" else "user"
        lines.append(f"- {platform}: {kind} {100000000 + index}")
    return "\n".join(lines) + "\n"


def cpu_s() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def pool_process(jobs, results) -> None:
    """A Celery pool process: executes each run it is handed with dagster_celery's task body.
    Its CPU up to RUN_START is read when the run's JSON log line for that event is written (the
    instance's python_logs handler writes to sys.stdout, which this process swallows)."""
    import io

    from dagster_celery.app import execute_job

    class RunStart(io.TextIOBase):
        cpu_at = None

        def write(self, text):
            if self.cpu_at is None and " - RUN_START - " in text:
                self.cpu_at = cpu_s()
            return len(text)

    sys.stdout = stamp = RunStart()
    for packed in iter(jobs.get, None):
        stamp.cpu_at = None
        t0, cpu0 = time.time(), cpu_s()
        execute_job(execute_job_args_packed=packed)
        results.put(dict(t0=t0, cpu_to_run_start_s=(stamp.cpu_at or float("nan")) - cpu0, cpu_s=cpu_s() - cpu0))


def write_celery_home(home: Path, autocreate: bool = True) -> None:
    import yaml

    from media_crawler.deploy.workers import WorkerPlan, render_instance_yaml

    instance = yaml.safe_load(render_instance_yaml(REPO / "deploy" / "dagster.postgres.yaml", WorkerPlan(4)))
    if not autocreate:  # written once the tables exist (prepare_home's instance created them)
        instance["storage"]["postgres"]["should_autocreate_tables"] = False
    launcher = yaml.safe_load((REPO / "deploy" / "celery_run_launcher.yaml").read_text())
    home.mkdir(exist_ok=True)
    Path(home, "dagster.yaml").write_text(yaml.safe_dump({**instance, **launcher}))


def launcher_imports() -> list[str]:
    """The modules deploy/celery_run_launcher.yaml has every run worker import before it forks."""
    import yaml

    launcher = yaml.safe_load((REPO / "deploy" / "celery_run_launcher.yaml").read_text())
    return list(launcher["run_launcher"]["config"]["config_source"].get("imports") or [])


def celery_main(args) -> int:
    import importlib
    import uuid

    work = Path(tempfile.mkdtemp(prefix="celery-run-start-"))
    db = f"mc_runstart_{uuid.uuid4().hex[:8]}"
    url = f"postgresql+psycopg2://postgres@127.0.0.1:5432/{db}"
    # Set before the fork (the pool process reads them per run); the files are written after it.
    os.environ.update(DAGSTER_HOME=str(work / "dagster_home"), DAGSTER_PG_URL=url, MEDIA_CRAWLER_LEDGER_URL=url,
                      MEDIA_CRAWLER_CONFIG=str(work / "sources.yaml"), MEDIA_CRAWLER_HOME=str(work / "home"))
    # The worker's parent: what `celery -A dagster_celery.app worker` has imported when it forks.
    import dagster_celery.app  # noqa: F401
    preloaded = launcher_imports() if args.preload else []
    for module in preloaded:
        importlib.import_module(module)
    fork = multiprocessing.get_context("fork")
    jobs, results = fork.Queue(), fork.Queue()
    pool = fork.Process(target=pool_process, args=(jobs, results))
    pool.start()
    subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", db], check=True)
    try:
        (work / "sources.yaml").write_text(celery_sources_yaml(args.sources))
        write_celery_home(work / "dagster_home")
        from dagster import DagsterInstance

        from media_crawler.commands.crawl import prepare_home
        from bench.instruments import load_1min
        from media_crawler.config import load_config

        with DagsterInstance.get() as instance:
            prepare_home(instance, load_config(work / "sources.yaml"))
        if args.no_autocreate:
            write_celery_home(work / "dagster_home", autocreate=False)
        with DagsterInstance.get() as instance:
            runs = [one_celery_run(instance, jobs, results) for _ in range(args.rounds)]
        result = dict(rounds=args.rounds, sources=args.sources, preload=preloaded,
                      autocreate_tables=not args.no_autocreate, cpus=os.cpu_count(),
                      load_1min=round(load_1min(), 2), runs=runs)
        for key in ("task_to_worker_started_s", "worker_started_to_run_start_s", "task_to_run_start_s",
                    "cpu_to_run_start_s", "run_cpu_s"):
            result[f"first_{key}"] = runs[0][key]
            if len(runs) > 1:
                result[f"warm_{key}_median"] = round(statistics.median(run[key] for run in runs[1:]), 3)
                result[f"warm_{key}_min"] = round(min(run[key] for run in runs[1:]), 3)
        print(json.dumps(result, indent=1))
    finally:
        jobs.put(None)
        pool.join(timeout=60)
        from media_crawler.store.database import dispose_engines

        dispose_engines()
        subprocess.run(["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--force", db], check=False)
        shutil.rmtree(work, ignore_errors=True)
    return 0


def one_celery_run(instance, jobs, results) -> dict:
    """Create one ranged run of the crawl job as `dagster job launch` would, hand it to the pool
    process, and read its launch from the event log."""
    from dagster import DagsterEventType, DagsterRunStatus
    from dagster._core.definitions.reconstruct import ReconstructableRepository
    from dagster._core.execution.api import create_execution_plan
    from dagster._grpc.types import ExecuteRunArgs
    from dagster._serdes import pack_value

    from media_crawler.shards import range_tags

    recon_job = ReconstructableRepository.for_module(
        "media_crawler.definitions", "defs", working_directory=str(REPO)).get_reconstructable_job("crawl")
    tags = range_tags(RUN_DAY, RUN_SHARDS)
    plan = create_execution_plan(recon_job, run_config={}, tags=tags, instance_ref=instance.get_ref())
    run = instance.create_run_for_job(job_def=recon_job.get_definition(), execution_plan=plan, run_config={},
                                      tags=tags, job_code_origin=recon_job.get_python_origin(),
                                      status=DagsterRunStatus.STARTING)
    jobs.put(pack_value(ExecuteRunArgs(job_origin=recon_job.get_python_origin(), run_id=run.run_id,
                                       instance_ref=instance.get_ref(), set_exit_code_on_failure=True)))
    done = results.get(timeout=600)
    stamps = {}
    for entry in instance.all_logs(run.run_id):
        event = entry.dagster_event
        if event is not None and event.event_type == DagsterEventType.RUN_START:
            stamps.setdefault("run_start", entry.timestamp)
        elif event is not None and (event.message or "").startswith("Started process for run"):
            stamps.setdefault("worker_started", entry.timestamp)
    return dict(status=instance.get_run_by_id(run.run_id).status.value,
                task_to_worker_started_s=round(stamps["worker_started"] - done["t0"], 3),
                worker_started_to_run_start_s=round(stamps["run_start"] - stamps["worker_started"], 3),
                task_to_run_start_s=round(stamps["run_start"] - done["t0"], 3),
                cpu_to_run_start_s=round(done["cpu_to_run_start_s"], 3), run_cpu_s=round(done["cpu_s"], 3))


if __name__ == "__main__":
    sys.exit(main())

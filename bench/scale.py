"""Scale rows of issue 16: the production path (dagster-daemon, queued runs, PostgreSQL),
`media-crawler crawl` on the embedded default, the Celery job, and sensor ticks with 10k sources.

    .venv/bin/python -m bench scale --row pg-10k-w4      # one row
    .venv/bin/python -m bench scale --all                # every row, in order
    .venv/bin/python -m bench scale --list

Every row starts a generated world (`media-crawler sim ...`) in its own process, so
the simulator's CPU is not counted, rewrites its sources.yaml with the row's shard
count and rate budget, crawls every shard partition of every day of the world, and
prints one JSON object. Production rows launch ranged runs as the schedule does (one run per
platform x day x `partitions.shards_per_run` shards, scale_launch.py); `--per-partition`
launches one run per partition with `dagster job backfill`, as the rows before issue 28 did.
The JSON is also written to /tmp/scale-results/ROW.json; SCALE.md is written from those by hand: see it for the definitions of every figure.

CPU is summed over the crawler side only: every process in the session of each
service this script starts (dagster-daemon with its code server and run workers,
Celery workers), read from /proc/<pid>/stat every 0.5 s; processes that exit are
accounted through their parent's cutime/cstime (reaped) or their last sample
(orphans). PostgreSQL backends serving the row's database are sampled the same way
and reported apart (`pg_backend_cpu_ms_per_item`). Nothing is added to pyproject.

Here: the workloads, the rows and the command line. The instruments are in
instruments.py (CPU by process role, the simulator, the rate sampler),
scale_postgres.py (the row's database) and scale_figures.py (per-run figures).
"""
from __future__ import annotations

import argparse
import json
import os
import platform as host
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
from bench.scale_figures import (claim_latency, claim_query_timing, ledger_by_run, run_figures,
                                 unfinished_sensor_query)
from bench.instruments import (BIN, CpuSampler, RateSampler, Sim, children_cpu_ms, free_port, load_1min, ms,
                               role_ms_per_item)
from bench.scale_postgres import backend_pids, createdb, dropdb, pg_figures, pg_query
from bench.scale_sensors import sensors_row
from media_crawler_sim.scale.content import generated_platforms

# The platforms a generated world serves (the simulator's parts marked `generated`).
PLATFORMS = generated_platforms()

RESULTS = Path("/tmp/scale-results")
# Requests/s and burst per platform: high enough that the budget is not what limits
# throughput, so the rows measure workers: per run 4 threads x (1 / 100 ms) = 40 media
# requests/s, or 4 x (1 / 50 ms) = 80 API requests/s while its feeds are walked; with up
# to 3 runs of one platform at once (WorkerPlan(4)), 240/s. (At 200/s, bilibili's feed
# walks, with no API latency then, were held by the budget in every row before 12-01.)
RATE, BURST = 400.0, 40.0

from bench.scale_rows import API_LATENCY_MS, EXTRA_ROWS, LATENCY_MS, ROWS, WORLDS  # noqa: E402


def write_config(sim: Sim, workdir: Path, workers: int, ledger_url: str | None,
                 shards: int | dict[str, int] = 1, shards_per_run: int | None = None) -> Path:
    data = yaml.safe_load(sim.sources.read_text())
    data["partitions"]["shards"] = shards
    if shards_per_run is not None:
        data["partitions"]["shards_per_run"] = shards_per_run
    data["workers"] = workers
    data["store"] = str(workdir / "store")
    if ledger_url:
        data["ledger_url"] = ledger_url
    for name in PLATFORMS:
        data.setdefault("platforms", {}).setdefault(name, {}).update(rate=RATE, burst=BURST)
    path = workdir / "sources.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# --- rows --------------------------------------------------------------------------------

def partitions_of(config_path: Path, days: list[str]) -> list[str]:
    from media_crawler.config import load_config

    config = load_config(config_path)
    return [f"{day}|{shard}" for day in days for shard in config.layout.shard_keys()]


def world_days(world: dict) -> list[str]:
    from datetime import timedelta

    from media_crawler_sim.world import DEFAULT_END_DATE

    return [(DEFAULT_END_DATE - timedelta(days=offset)).isoformat() for offset in reversed(range(world["days"]))]


def production_home(sim: "Sim", workdir: Path, spec: dict) -> tuple[Path, Path]:
    """(sources.yaml, DAGSTER_HOME) of a production-path row: the row's shard count, and
    deploy/dagster.postgres.yaml rendered for its workers."""
    from media_crawler.deploy.workers import WorkerPlan, render_instance_yaml

    config_path = write_config(sim, workdir, spec["workers"], None, spec.get("shards", 1), spec.get("shards_per_run"))
    home = workdir / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(render_instance_yaml(REPO / "deploy" / "dagster.postgres.yaml",
                                                            WorkerPlan(spec["workers"])))
    return config_path, home


def celery_run_launcher(home: Path, workdir: Path, queue: str) -> Path:
    """Merge deploy/celery_run_launcher.yaml into the row's dagster.yaml, on a queue of the
    row's own, and write the run workers' -y file (the launcher's broker, backend and settings,
    as deploy/README.md "Runs in Celery workers" says). Returns that file."""
    instance_yaml = yaml.safe_load((home / "dagster.yaml").read_text())
    launcher = yaml.safe_load((REPO / "deploy" / "celery_run_launcher.yaml").read_text())
    settings = launcher["run_launcher"]["config"]
    settings["default_queue"] = queue
    (home / "dagster.yaml").write_text(yaml.safe_dump({**instance_yaml, **launcher}))
    runs_yaml = workdir / "runs.yaml"
    runs_yaml.write_text(yaml.safe_dump({"execution": {"config": {
        "broker": settings["broker"], "backend": settings["backend"],
        "config_source": {**settings["config_source"], "task_default_queue": queue}}}}))
    return runs_yaml


def daemon_row(name: str, spec: dict, workdir: Path, celery: bool = False, per_partition: bool = False) -> dict:
    """The production path: dagster-daemon, PostgreSQL, the row's runs queued at once. Runs are
    ranged as the product launches them (scale_launch.py), or with `per_partition` one per
    partition by `dagster job backfill`. spec["run_launcher"] == "celery": CeleryRunLauncher,
    `workers` Celery run workers of one slot each."""
    import resource

    from dagster import DagsterInstance, RunsFilter

    from bench.scale_launch import backfill_per_partition, ranged_run_tags, submit_runs
    from media_crawler.shards import partitions_of_run

    from media_crawler.commands.crawl import prepare_home
    from media_crawler.config import load_config
    from media_crawler.environment import LEDGER_ENV
    from media_crawler.deploy.services import ServiceGroup, dagster_env
    from media_crawler.store.ledger import Ledger

    world = WORLDS[spec["world"]]
    days = world_days(world)
    db, url = createdb()
    sim = Sim(workdir, world, *row_latency(spec))
    sampler = CpuSampler(backends=backend_pids(db))
    extra = {"DAGSTER_PG_URL": url, LEDGER_ENV: url, "FB_ACCESS_TOKEN": "scale-token-not-secret"}
    os.environ.update(extra)
    queue = None
    celery_launcher = spec.get("run_launcher") == "celery"
    try:
        config_path, home = production_home(sim, workdir, spec)
        if celery_launcher:
            queue = f"mc_scale_runs_{uuid.uuid4().hex[:8]}"
            runs_yaml = celery_run_launcher(home, workdir, queue)
        if celery:
            settings = yaml.safe_load((REPO / "deploy" / "celery.yaml").read_text())
            queue = f"mc_scale_{uuid.uuid4().hex[:8]}"
            settings["execution"]["config"]["config_source"]["task_default_queue"] = queue
            celery_yaml = workdir / "celery.yaml"
            celery_yaml.write_text(yaml.safe_dump(settings))
            extra["MEDIA_CRAWLER_CELERY_CONFIG"] = str(celery_yaml)
            os.environ["MEDIA_CRAWLER_CELERY_CONFIG"] = str(celery_yaml)
        env = dagster_env(dagster_home=home, config_path=config_path, media_home=workdir, extra=extra)
        config = load_config(config_path)
        with DagsterInstance.from_config(str(home)) as instance:
            prepare_home(instance, config)
        partitions = partitions_of(config_path, days)
        job = "crawl_celery" if celery else "crawl"
        with ServiceGroup(env, log_dir=workdir / "logs") as services:
            if celery:
                for index in range(spec["workers"]):
                    worker = services.start_celery_worker(f"w{index}-{queue}", workdir / "celery.yaml",
                                                          queues=[queue, f"{queue}_w{index}"])
                    sampler.add_session(worker.pid)
            if celery_launcher:
                for index in range(spec["workers"]):
                    sampler.add_session(services.start_celery_worker(f"r{index}-{queue}", runs_yaml, [queue]).pid)
            if spec.get("code_server"):
                sampler.add_session(services.start_code_server(free_port()).pid)
            daemon = services.start_daemon()
            sampler.add_session(daemon.pid)
            sampler.start()
            time.sleep(8)  # the daemon loads the code location; not part of the figures
            cpu0, pg0 = sampler.ticks(), sum(sampler.backend_ticks.values())
            roles0 = sampler.ticks_by_role()
            sim_cpu0 = sim.cpu_ms()
            rates = RateSampler(lambda: sim.stats().get("requests", {}), PLATFORMS, RATE, BURST)
            rates.start()
            t0 = time.time()
            children_cpu_ms()  # from here: the launch's CPU alone (its command, or this thread and its code server)
            thread0 = resource.getrusage(resource.RUSAGE_THREAD)
            submit = time.perf_counter()
            if per_partition:
                backfill_per_partition(services.workspace, job, partitions, env)
                launched = len(partitions)
            else:
                launched = len(submit_runs(home, services.workspace, job, ranged_run_tags(config_path, days), env))
            submit_s = time.perf_counter() - submit
            thread1 = resource.getrusage(resource.RUSAGE_THREAD)
            launch_cpu = children_cpu_ms() + 1000 * (thread1.ru_utime + thread1.ru_stime
                                                       - thread0.ru_utime - thread0.ru_stime)
            with DagsterInstance.from_config(str(home)) as instance:
                deadline = time.monotonic() + 3600
                while True:
                    services.check_alive()
                    runs = instance.get_runs(filters=RunsFilter(job_name=job))
                    covered = {key for run in runs for key in partitions_of_run(run.tags)}
                    if len(runs) >= launched and set(partitions) <= covered and all(run.status.value in ("SUCCESS", "FAILURE", "CANCELED")
                                                          for run in runs):
                        break
                    if time.monotonic() > deadline:
                        raise RuntimeError("timed out")
                    time.sleep(1)
                cpu1, pg1 = sampler.ticks(), sum(sampler.backend_ticks.values())
                roles1 = sampler.ticks_by_role()
                sim_cpu1 = sim.cpu_ms()
                rates.stopping.set()
                engine = Ledger(url).engine
                per_run = run_figures(instance, runs, ledger_by_run(engine))
        sampler.stop()
        t_end = max(r["end"] for r in per_run if r["end"])
        wall = t_end - t0
        latency = claim_latency(engine)
        items = latency["states"].get("committed", 0)
        result = dict(row=name, kind="celery" if celery else "daemon", world=world, items=items, wall_s=wall,
                      items_per_s=items / wall, workers=spec["workers"], runs=len(per_run),
                      launch="per partition (dagster job backfill)" if per_partition else "ranged (ranged_run_requests)",
                      run_launcher="CeleryRunLauncher" if celery_launcher else "default", partitions=len(partitions),
                      shards_per_run=load_config(config_path).layout.shards_per_run,
                      statuses=sorted({r["status"] for r in per_run}), backfill_submit_s=submit_s,
                      crawler_cpu_ms_per_item=(ms(cpu1 - cpu0) + launch_cpu) / max(items, 1),
                      crawler_cpu_ms_per_item_by_role={**role_ms_per_item(roles0, roles1, items),
                                                       "launch": round(launch_cpu / max(items, 1), 2)},
                      pg_backend_cpu_ms_per_item=ms(pg1 - pg0) / max(items, 1),
                      sim_cpu_ms_per_item=(sim_cpu1 - sim_cpu0) / max(items, 1),
                      rate_peaks=rates.peaks(), **rates.budget(), **latency)
        result.update(pg_figures(db, per_run, items))
        result.update(claim_query_timing(config_path, days))
        result["unfinished_query_ms"] = unfinished_sensor_query(config_path)
        result["per_run"] = per_run
        return result
    finally:
        sim.stop()
        sampler.stop()
        for key in extra:
            os.environ.pop(key, None)
        if queue:
            _delete_queues([queue] + [f"{queue}_w{i}" for i in range(spec["workers"])])
        dropdb(db)


def idle_row(name: str, spec: dict, workdir: Path) -> dict:
    """CPU of dagster-daemon (and its code server) over `seconds` with no run to execute."""
    from dagster import DagsterInstance

    from media_crawler.commands.crawl import prepare_home
    from media_crawler.config import load_config
    from media_crawler.environment import LEDGER_ENV
    from media_crawler.deploy.services import ServiceGroup, dagster_env

    world = WORLDS[spec["world"]]
    db, url = createdb()
    sim = Sim(workdir, world, *row_latency(spec))
    extra = {"DAGSTER_PG_URL": url, LEDGER_ENV: url, "FB_ACCESS_TOKEN": "scale-token-not-secret"}
    os.environ.update(extra)
    sampler = CpuSampler(backends=backend_pids(db))
    try:
        config_path, home = production_home(sim, workdir, spec)
        env = dagster_env(dagster_home=home, config_path=config_path, media_home=workdir, extra=extra)
        with DagsterInstance.from_config(str(home)) as instance:
            prepare_home(instance, load_config(config_path))
        with ServiceGroup(env, log_dir=workdir / "logs") as services:
            sampler.add_session(services.start_daemon().pid)
            sampler.start()
            time.sleep(15)  # start-up and the code location's load
            cpu0, pg0 = sampler.ticks(), sum(sampler.backend_ticks.values())
            time.sleep(spec["seconds"])
            cpu1, pg1 = sampler.ticks(), sum(sampler.backend_ticks.values())
        return dict(row=name, kind="idle", world=world, workers=spec["workers"], seconds=spec["seconds"],
                    daemon_cpu_ms_per_s=ms(cpu1 - cpu0) / spec["seconds"], pg_backend_cpu_ms_per_s=ms(pg1 - pg0) / spec["seconds"])
    finally:
        sampler.stop()
        sim.stop()
        for key in extra:
            os.environ.pop(key, None)
        dropdb(db)


def _delete_queues(queues) -> None:
    try:
        from kombu import Connection

        with Connection("pyamqp://guest:guest@127.0.0.1:5672//", connect_timeout=5) as connection:
            for queue in queues:
                connection.default_channel.queue_delete(queue)
    except Exception:
        pass


def crawl_row(name: str, spec: dict, workdir: Path) -> dict:
    """`media-crawler crawl` with MEDIA_CRAWLER_HOME only: SQLite ledger, SQLite Dagster instance, files."""
    from dagster import DagsterInstance, RunsFilter
    from sqlalchemy import create_engine

    world = WORLDS[spec["world"]]
    days = world_days(world)
    sim = Sim(workdir, world, *row_latency(spec))
    try:
        home = workdir / "home"
        home.mkdir()
        config_path = write_config(sim, home, 1, None)
        # `crawl` needs DAGSTER_HOME: the embedded instance (SQLite) inside the home, as `demo`/`ui` make it.
        dagster_home = home / "dagster_home"
        dagster_home.mkdir()
        shutil.copyfile(REPO / "media_crawler" / "instance" / "dagster.yaml", dagster_home / "dagster.yaml")
        env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "MEDIA_CRAWLER_LEDGER_URL")}
        env.update(MEDIA_CRAWLER_HOME=str(home), DAGSTER_HOME=str(dagster_home), FB_ACCESS_TOKEN="scale-token-not-secret")
        rates = RateSampler(lambda: sim.stats().get("requests", {}), PLATFORMS, RATE, BURST)
        rates.start()
        sim_cpu0 = sim.cpu_ms()
        t0 = time.time()
        argv = [str(BIN / "media-crawler"), "crawl", "--config", str(config_path)] + sum((["--day", d] for d in days), [])
        with open(workdir / "crawl.log", "wb") as log:
            process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
            _pid, status, usage = os.wait4(process.pid, 0)
        wall = time.time() - t0
        rates.stopping.set()
        sim_cpu1 = sim.cpu_ms()
        cpu_ms = (usage.ru_utime + usage.ru_stime) * 1000
        ledger_path = home / "ledger.db"
        engine = create_engine(f"sqlite:///{ledger_path}")
        latency = claim_latency(engine)
        items = latency["states"].get("committed", 0)
        with DagsterInstance.from_config(str(dagster_home)) as instance:
            runs = instance.get_runs(filters=RunsFilter())
            per_run = run_figures(instance, runs, ledger_by_run(engine))
        event_rows = sum(r["events"] for r in per_run)
        event_bytes = _sqlite_event_bytes(dagster_home)
        ledger_files = sum(p.stat().st_size for p in home.glob("ledger.db*"))
        result = dict(row=name, kind="crawl", world=world, items=items, wall_s=wall, items_per_s=items / wall,
                      workers=1, runs=len(per_run), exit_status=os.waitstatus_to_exitcode(status),
                      statuses=sorted({r["status"] for r in per_run}),
                      crawler_cpu_ms_per_item=cpu_ms / max(items, 1),
                      sim_cpu_ms_per_item=(sim_cpu1 - sim_cpu0) / max(items, 1), rate_peaks=rates.peaks(), **rates.budget(),
                      **latency,
                      event_log_rows_total=event_rows, event_log_rows_per_10k_items=event_rows * 10_000 / max(items, 1),
                      event_log_bytes_total=event_bytes, event_log_bytes_per_10k_items=event_bytes * 10_000 / max(items, 1),
                      ledger_rows=sum(latency["states"].values()), ledger_file_bytes=ledger_files,
                      ledger_bytes_per_row=ledger_files / max(sum(latency["states"].values()), 1),
                      dagster_home_bytes=sum(p.stat().st_size for p in dagster_home.rglob("*") if p.is_file()))
        os.environ["MEDIA_CRAWLER_HOME"] = str(home)
        try:
            result.update(claim_query_timing(config_path, days))
            result["unfinished_query_ms"] = unfinished_sensor_query(config_path)
        finally:
            os.environ.pop("MEDIA_CRAWLER_HOME", None)
        for run in per_run:
            run["event_log_rows"] = run["events"]
        result["per_run"] = per_run
        return result
    finally:
        sim.stop()


def _sqlite_event_bytes(dagster_home: Path) -> int:
    """Bytes of the stored event bodies in the SQLite instance (history/runs/*.db and index.db)."""
    import sqlite3

    total = 0
    for path in (dagster_home / "history" / "runs").glob("*.db"):
        if path.name == "index.db":
            continue
        conn = sqlite3.connect(path)
        try:
            total += conn.execute("select coalesce(sum(length(event)), 0) from event_logs").fetchone()[0]
        except sqlite3.Error:
            pass
        finally:
            conn.close()
    return total


def row_latency(spec: dict) -> tuple[float, float]:
    """(media, API) latency in ms: the rows' default, or the row's own (the -slow rows)."""
    return spec.get("latency_ms", LATENCY_MS), spec.get("api_latency_ms", API_LATENCY_MS)


def run_row(name: str, keep: bool = False, per_partition: bool = False) -> dict:
    spec = {**ROWS, **EXTRA_ROWS}[name]
    workdir = Path(tempfile.mkdtemp(prefix=f"scale-{name}-", dir="/tmp"))
    started = time.time()
    speed_before = speed_probe_ms()
    try:
        if spec["kind"] == "daemon":
            result = daemon_row(name, spec, workdir, per_partition=per_partition)
        elif spec["kind"] == "celery":
            result = daemon_row(name, spec, workdir, celery=True, per_partition=per_partition)
        elif spec["kind"] == "idle":
            result = idle_row(name, spec, workdir)
        elif spec["kind"] == "crawl":
            result = crawl_row(name, spec, workdir)
        else:
            result = sensors_row(name, spec, workdir)
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    result.update(measured_at=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)), machine=machine(),
                  latency_ms=row_latency(spec)[0], api_latency_ms=row_latency(spec)[1], rate_per_platform=RATE, burst_per_platform=BURST,
                  row_seconds=time.time() - started, speed_probe_ms=[speed_before, speed_probe_ms()])
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=1, default=str))
    return result


def speed_probe_ms() -> float:
    """A fixed pure-Python loop, timed before and after each row: a VM's speed was seen to
    change by 2x within an hour (the simulator's CPU per item, a fixed workload, with it), so
    rows are comparable only when their probes agree."""
    start = time.perf_counter()
    total = 0
    for i in range(3_000_000):
        total += i * i
    return round((time.perf_counter() - start) * 1000, 1)


def machine() -> str:
    import dagster

    return (f"{host.node()}, {os.cpu_count()} cores shared with others' test runs (load {load_1min():.1f} at start), "
            f"Python {host.python_version()}, dagster {dagster.__version__}, "
            f"PostgreSQL {_pg_version()}")


def _pg_version() -> str:
    try:
        return pg_query("postgres", "show server_version")[0][0]
    except Exception:
        return "unreachable"


def summary(result: dict) -> str:
    keep = {k: v for k, v in result.items() if k != "per_run"}
    runs = result.get("per_run") or []
    if runs:
        big = [r for r in runs if r["items"] >= 500 and r.get("dagster_share") is not None]
        keep["runs_summary"] = dict(
            items_per_run=sorted(r["items"] for r in runs),
            partitions_per_run=sorted(len(r.get("partitions") or [r.get("partition")]) for r in runs),
            event_rows_per_run=sorted({r.get("event_log_rows", r["events"]) for r in runs}),
            dagster_share_max=max((r["dagster_share"] for r in runs if r["dagster_share"] is not None), default=None),
            dagster_share_max_500=max((r["dagster_share"] for r in big), default=None),
            outside_items_share_max_500=max((r["outside_items_share"] for r in big if r["outside_items_share"] is not None), default=None),
            to_first_item_s_median=statistics.median([r["to_first_item_s"] for r in runs if r["to_first_item_s"] is not None] or [0]),
            wall_s_median=statistics.median([r["wall_s"] for r in runs if r["wall_s"]] or [0]),
            outside_steps_median_s={part: round(statistics.median(values), 2) for part, values in _outside_parts(runs).items()},
            outside_steps_max_s={part: round(max(values), 2) for part, values in _outside_parts(runs).items()},
        )
    return json.dumps(keep, indent=1, default=str)


def _outside_parts(runs) -> dict[str, list[float]]:
    parts: dict[str, list[float]] = {}
    for run in runs:
        for part, seconds in (run.get("outside_steps") or {}).items():
            if seconds is not None:
                parts.setdefault(part, []).append(seconds)
    return parts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--row", action="append", choices=sorted({**ROWS, **EXTRA_ROWS}), help="row to run (repeatable)")
    parser.add_argument("--all", action="store_true", help="every row, in the order of ROWS")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the row's /tmp/scale-* directory")
    parser.add_argument("--per-partition", action="store_true",
                        help="launch one run per partition with `dagster job backfill`, as the rows before issue 28 "
                             "(default: ranged runs, as the schedule and sensors launch them)")
    args = parser.parse_args(argv)
    if args.list:
        for name, spec in ROWS.items():
            print(name, spec)
        return 0
    names = list(ROWS) if args.all else (args.row or [])
    if not names:
        parser.error("--row NAME or --all")
    # Bytecode as an installed package has it: spawned run workers (python -B) never write it, so a
    # checkout without __pycache__ would compile the code location in every launch (~0.5 G instructions).
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "media_crawler"),
                    str(REPO / "media_crawler_sim"), str(REPO / "bench")], check=True)
    failed = []
    for name in names:
        print(f"== {name}", file=sys.stderr, flush=True)
        try:
            print(summary(run_row(name, keep=args.keep, per_partition=args.per_partition)), flush=True)
        except Exception as error:  # the other rows still run
            import traceback

            traceback.print_exc()
            failed.append(f"{name}: {type(error).__name__}: {error}"[:300])
    for line in failed:
        print(f"FAILED {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Scale rows of issue 16: the production path (dagster-daemon, queued runs, PostgreSQL),
`media-crawler crawl` on the embedded default, the Celery job, and sensor ticks with 10k sources.

    .venv/bin/python bench/scale.py --row pg-10k-w4      # one row
    .venv/bin/python bench/scale.py --all                # every row, in order
    .venv/bin/python bench/scale.py --list

Every row starts a generated world (`media-crawler sim ...`) in its own process, so
the simulator's CPU is not counted, rewrites its sources.yaml with the row's shard
count and rate budget, crawls every shard partition of every day of the world, and
prints one JSON object (also written to /tmp/scale-results/ROW.json). SCALE.md is
written from those by hand: see it for the definitions of every figure.

CPU is summed over the crawler side only: every process in the session of each
service this script starts (dagster-daemon with its code server and run workers,
Celery workers), read from /proc/<pid>/stat every 0.5 s; processes that exit are
accounted through their parent's cutime/cstime (reaped) or their last sample
(orphans). PostgreSQL backends serving the row's database are sampled the same way
and reported apart (`pg_backend_cpu_ms_per_item`). Nothing is added to pyproject.
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
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
BIN = Path(sys.executable).parent
RESULTS = Path("/tmp/scale-results")
TICK = os.sysconf("SC_CLK_TCK")
PLATFORMS = ("bilibili", "weibo", "facebook", "urls")
# Requests/s and burst per platform: high enough that the budget is not what limits
# throughput, so the rows measure workers: per run 4 threads x (1 / 100 ms) = 40 media
# requests/s, or 4 x (1 / 50 ms) = 80 API requests/s while its feeds are walked; with up
# to 3 runs of one platform at once (WorkerPlan(4)), 240/s. (At 200/s, bilibili's feed
# walks, with no API latency then, were held by the budget in every row before 12-01.)
RATE, BURST = 400.0, 40.0
PG = dict(host="127.0.0.1", port=5432, user="postgres")

# name -> settings. accounts are per platform; items = 4 platforms x accounts x days x posts x media (about).
WORLDS = {
    "1k": dict(accounts=16, days=4, posts_per_day=2, media_per_post=2),
    "10k": dict(accounts=160, days=4, posts_per_day=2, media_per_post=2),
    "40k": dict(accounts=640, days=4, posts_per_day=2, media_per_post=2),
    "100k": dict(accounts=1600, days=4, posts_per_day=2, media_per_post=2),
    # The same item counts over 2 days with twice the accounts: partitions twice as big.
    "10k-2d": dict(accounts=320, days=2, posts_per_day=2, media_per_post=2),
    "100k-2d": dict(accounts=3200, days=2, posts_per_day=2, media_per_post=2),
}
LATENCY_MS = 100.0  # before every media answer: the I/O-bound world the worker rows ask for
API_LATENCY_MS = 50.0  # before every API answer (feed pages, play URLs): a real API takes 100-300 ms
ROWS = {  # --all runs them in this order
    "pg-1k-w1": dict(kind="daemon", world="1k", workers=1),
    "pg-1k-w4": dict(kind="daemon", world="1k", workers=4),
    "pg-10k-w1": dict(kind="daemon", world="10k", workers=1),
    "pg-10k-w4": dict(kind="daemon", world="10k", workers=4),
    "crawl-10k": dict(kind="crawl", world="10k", workers=1),
    "celery-10k-w2": dict(kind="celery", world="10k", workers=2),
    "sensors-10k": dict(kind="sensors"),
    # ~100k items is cut to ~40k in --all: on 2 shared cores the crawler side needs ~35 ms CPU per
    # item, so 100k takes ~30 min at 4 workers (> 15 min) and ~70 min at 1 worker. --row pg-100k-w4 runs it.
    "pg-40k-w4": dict(kind="daemon", world="40k", workers=4),
}
# The 100k row against pg-10k-w4: 10 shards per platform keep 160 sources (~860 items) per
# partition, as the 10k row's 1 shard does, so the two differ in the ledger's size, the
# registered sources and the partition count, not in how long a partition works.
EXTRA_ROWS = {"pg-100k-w4": dict(kind="daemon", world="100k", workers=4, shards=10),
              # The 1-vs-4-worker pair on 64 partitions (4 shards, 40 sources each) instead of 16: with
              # 16, the backfill's tail (the last of bilibili's 4 long partitions, dequeued in day
              # order) bounds the 4-worker row, not the workers.
              "pg-10k-w1-s4": dict(kind="daemon", world="10k", workers=1, shards=4),
              "pg-10k-w4-s4": dict(kind="daemon", world="10k", workers=4, shards=4),
              # Balanced partitions (docs/SHARDS.md, "Picking the shard count"): a bilibili source yields
              # 2.7x the items of the others (a part is video + audio), so bilibili gets 3x their shards,
              # and 2 days of twice the accounts make every partition ~1,070-1,180 items (24 s of
              # work at 4 threads): 12 partitions at 10k, 120 at 100k, no platform's runs longer than
              # the others'. The three rows run in one invocation (--row ... --row ...).
              "pg-10k-w1-b": dict(kind="daemon", world="10k-2d", workers=1,
                                  shards=dict(bilibili=3, weibo=1, facebook=1, urls=1)),
              "pg-10k-w4-b": dict(kind="daemon", world="10k-2d", workers=4,
                                  shards=dict(bilibili=3, weibo=1, facebook=1, urls=1)),
              "pg-100k-w4-b": dict(kind="daemon", world="100k-2d", workers=4,
                                   shards=dict(bilibili=30, weibo=10, facebook=10, urls=10)),
              # The same three with the code server as a service of its own (deploy/README.md): the daemon
              # no longer replaces its code server every 60 s.
              "pg-10k-w1-cs": dict(kind="daemon", world="10k-2d", workers=1, code_server=True,
                                   shards=dict(bilibili=3, weibo=1, facebook=1, urls=1)),
              "pg-10k-w4-cs": dict(kind="daemon", world="10k-2d", workers=4, code_server=True,
                                   shards=dict(bilibili=3, weibo=1, facebook=1, urls=1)),
              "pg-100k-w4-cs": dict(kind="daemon", world="100k-2d", workers=4, code_server=True,
                                    shards=dict(bilibili=30, weibo=10, facebook=10, urls=10)),
              # The daemon with nothing to run, 640 sources: its per-second CPU (queue, sensors, monitoring).
              "daemon-idle-10k": dict(kind="idle", world="10k", workers=4, seconds=90)}


# --- CPU of process trees ------------------------------------------------------------

def _stat(pid: int):
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    # fields[0] is state (field 3); ppid 4, session 6, utime 14, stime 15, cutime 16, cstime 17
    return dict(ppid=int(fields[1]), sid=int(fields[3]), own=int(fields[11]) + int(fields[12]),
                children=int(fields[13]) + int(fields[14]))


class CpuSampler(threading.Thread):
    """CPU ticks of every process in the given sessions, plus of explicit pids (PostgreSQL backends)."""

    def __init__(self, interval: float = 0.5, backends=None) -> None:
        super().__init__(daemon=True)
        self.sessions: set[int] = set()
        self.interval, self.backends = interval, backends
        self.last: dict[int, dict] = {}
        self.roles: dict[int, str] = {}
        self.backend_ticks: dict[int, int] = {}
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    def add_session(self, pid: int) -> None:
        self.sessions.add(pid)

    def sample(self) -> None:
        seen = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            stat = _stat(int(entry))
            if stat and stat["sid"] in self.sessions:
                seen[int(entry)] = stat
        with self.lock:
            for pid in list(self.last):
                if pid not in seen:
                    self.last[pid]["gone"] = True
            for pid, stat in seen.items():
                self.last[pid] = stat
                if pid not in self.roles:
                    self.roles[pid] = process_role(pid)
        if self.backends:
            for pid in self.backends():
                stat = _stat(pid)
                if stat:
                    self.backend_ticks[pid] = max(self.backend_ticks.get(pid, 0), stat["own"])

    def run(self) -> None:
        while not self.stopping.wait(self.interval):
            self.sample()

    def ticks(self) -> int:
        """Live processes: own + reaped children. Gone ones: their last sample when
        their parent is gone too (nobody's cutime holds them), else nothing (the parent's does)."""
        self.sample()
        with self.lock:
            live = {pid for pid, s in self.last.items() if not s.get("gone")}
            total = sum(s["own"] + s["children"] for pid, s in self.last.items() if pid in live)
            total += sum(s["own"] + s["children"] for pid, s in self.last.items()
                         if s.get("gone") and s["ppid"] not in live)
        return total

    def ticks_by_role(self) -> dict[str, int]:
        """The ticks of `ticks()` by what each process is (`process_role`). A process that
        exited under a live parent is in the parent's cutime; it is split out by its own
        last sample (its own ticks to its role, its reaped children's to theirs: a code
        server's children are run workers), and what it used after that sample is left
        to "<parent role> (exited, after last sample)"."""
        self.sample()
        totals: dict[str, int] = defaultdict(int)
        with self.lock:
            live = {pid for pid, s in self.last.items() if not s.get("gone")}
            for pid, stat in self.last.items():
                role = self.roles.get(pid, "other")
                if pid in live or stat["ppid"] not in live:
                    totals[role] += stat["own"]
                    children = stat["children"]
                    if pid in live:  # its exited children, from their last samples
                        for kid in (k for k, s in self.last.items() if s.get("gone") and s["ppid"] == pid):
                            kid_stat, kid_role = self.last[kid], self.roles.get(kid, "other")
                            totals[kid_role] += kid_stat["own"]
                            totals[CHILDREN_ROLE.get(kid_role, kid_role)] += kid_stat["children"]
                            children -= kid_stat["own"] + kid_stat["children"]
                        totals[f"{role} (exited, after last sample)"] += children
                    else:
                        totals[CHILDREN_ROLE.get(role, role)] += children
        return dict(totals)

    def stop(self) -> None:
        self.stopping.set()


# The first of these found in a process's command line names its role in ticks_by_role. The
# code server starts each run worker with multiprocessing's spawn (dagster/_grpc/server.py).
ROLE_MARKS = (("multiprocessing.spawn", "run_worker"), ("multiprocessing.resource_tracker", "run_worker"),
              ("execute_step", "step_worker"), ("api grpc", "code_server"), ("code-server", "code_server"),
              ("dagster-daemon", "daemon"), ("celery", "celery_worker"))
CHILDREN_ROLE = {"code_server": "run_worker"}


def process_role(pid: int) -> str:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "other"
    return next((role for mark, role in ROLE_MARKS if mark in cmdline), "other")


def role_ms_per_item(before: dict[str, int], after: dict[str, int], items: int) -> dict[str, float]:
    return {role: round(ms(after.get(role, 0) - before.get(role, 0)) / max(items, 1), 2)
            for role in sorted(set(before) | set(after))}


def ms(ticks: float) -> float:
    return ticks * 1000.0 / TICK


# --- the simulator, in its own process --------------------------------------------------

class Sim:
    def __init__(self, workdir: Path, world: dict, latency_ms: float) -> None:
        self.sources = workdir / "sim-sources.yaml"
        argv = [str(BIN / "media-crawler"), "sim", "--port", "0", "--media-latency-ms", str(latency_ms),
                "--api-latency-ms", str(API_LATENCY_MS),
                "--accounts", str(world["accounts"]), "--days", str(world["days"]),
                "--posts-per-day", str(world["posts_per_day"]), "--media-per-post", str(world["media_per_post"]),
                "--media-size", "small", "--write-sources", str(self.sources)]
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=open(workdir / "sim.log", "wb"),
                                        text=True, start_new_session=True)
        self.base_url = self.process.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            raise RuntimeError(f"simulator did not start: {(workdir / 'sim.log').read_text()[-2000:]}")

    def stats(self) -> dict:
        import requests

        # The totals only: the per-path part of a 100k-item world is ~0.5 s of the simulator's CPU
        # per poll, and the sampler polls every 0.5 s (it took 93 % of the simulator's CPU).
        return requests.get(f"{self.base_url}/_sim/stats?per_path=0", timeout=10).json()

    def cpu_ms(self) -> float:
        stat = _stat(self.process.pid)
        return ms(stat["own"]) if stat else float("nan")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


class RateSampler(threading.Thread):
    """The simulator's request counters every 0.5 s; the busiest 1 s window per platform."""

    def __init__(self, sim: Sim) -> None:
        super().__init__(daemon=True)
        self.sim, self.samples, self.stopping = sim, [], threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(0.5):
            try:
                self.samples.append((time.monotonic(), _per_platform(self.sim.stats().get("requests", {}))))
            except Exception:
                pass

    def peaks(self) -> dict[str, int]:
        """Requests in the busiest window of >= 1 s (the shortest such window between two samples)."""
        peaks: dict[str, int] = defaultdict(int)
        self.excess: dict[str, float] = defaultdict(float)  # max of count - rate x window: must stay <= burst
        self.longest_window = 0.0
        for i, (t, later) in enumerate(self.samples):
            for t0, earlier in self.samples[:i][::-1]:
                if t - t0 >= 1.0:
                    self.longest_window = max(self.longest_window, t - t0)
                    for name, count in later.items():
                        done = count - earlier.get(name, 0)
                        peaks[name] = max(peaks[name], done)
                        self.excess[name] = max(self.excess[name], done - RATE * (t - t0))
                    break
        return dict(peaks)

    def budget(self) -> dict:
        self.peaks()
        return dict(rate_excess_over_rate_x_window=dict(self.excess), rate_burst=BURST,
                    rate_within_budget=all(v <= BURST for v in self.excess.values()),
                    rate_longest_window_s=self.longest_window)


def _per_platform(requests_by_prefix: dict) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for prefix, count in requests_by_prefix.items():
        name = prefix.removeprefix("/media").strip("/").split("-")[0].split("/")[0]
        if name in PLATFORMS:
            counts[name] += count if isinstance(count, int) else 0
    return dict(counts)


def write_config(sim: Sim, workdir: Path, workers: int, ledger_url: str | None,
                 shards: int | dict[str, int] = 1) -> Path:
    data = yaml.safe_load(sim.sources.read_text())
    data["partitions"]["shards"] = shards
    data["workers"] = workers
    data["store"] = str(workdir / "store")
    if ledger_url:
        data["ledger_url"] = ledger_url
    for name in PLATFORMS:
        data.setdefault("platforms", {}).setdefault(name, {}).update(rate=RATE, burst=BURST)
    path = workdir / "sources.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- PostgreSQL -----------------------------------------------------------------------

def createdb() -> tuple[str, str]:
    import psycopg2

    name = f"mc_scale_{uuid.uuid4().hex[:8]}"
    admin = psycopg2.connect(dbname="postgres", **PG)
    admin.autocommit = True
    with admin.cursor() as cursor:
        cursor.execute(f'CREATE DATABASE "{name}"')
    admin.close()
    return name, f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}"


def dropdb(name: str) -> None:
    import psycopg2

    from media_crawler.store.database import dispose_engines

    dispose_engines()
    admin = psycopg2.connect(dbname="postgres", **PG)
    admin.autocommit = True
    with admin.cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.close()


def pg_query(db: str, sql: str, args=()):
    import psycopg2

    conn = psycopg2.connect(dbname=db, **PG)
    try:
        with conn.cursor() as cursor:
            cursor.execute(sql, args)
            return cursor.fetchall()
    finally:
        conn.close()


def backend_pids(db: str):
    def pids():
        try:
            return [row[0] for row in pg_query("postgres", "select pid from pg_stat_activity where datname = %s", (db,))]
        except Exception:
            return []
    return pids


# --- figures from Dagster and the ledger ----------------------------------------------------

def run_figures(instance, runs, ledger_rows: dict) -> list[dict]:
    """Per run: queue wait, wall (STARTING -> SUCCESS), steps' time, first item, event-log rows."""
    from dagster import DagsterEventType

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
        start = ts.get("PIPELINE_STARTING") or ts.get("PIPELINE_START")
        end = ts.get("PIPELINE_SUCCESS") or ts.get("PIPELINE_FAILURE")
        step_s = sum(s.get("STEP_SUCCESS", s.get("STEP_FAILURE", 0)) - s["STEP_START"] for s in steps.values()
                     if "STEP_START" in s)
        row = ledger_rows.get(run.run_id, {})
        wall = (end - start) if start and end else None
        out.append(dict(
            run_id=run.run_id, partition=run.tags.get("dagster/partition"), status=run.status.value,
            items=row.get("items", 0), events=len(records),
            queued_s=(start - ts["PIPELINE_ENQUEUED"]) if start and "PIPELINE_ENQUEUED" in ts else None,
            wall_s=wall, steps_s=step_s,
            to_first_item_s=(row["first"] - start) if start and row.get("first") else None,
            dagster_share=(1 - step_s / wall) if wall else None,
            outside_items_share=((wall - (row["last"] - row["first"])) / wall) if wall and row.get("first") else None,
            start=start, end=end,
        ))
    return out


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

    config = load_config(config_path)
    ledger = Ledger(config.ledger_url)
    groups = config.layout.group(source.key for source in config.sources)
    times = []
    for shard, keys in groups.items():
        for day in days:
            for _ in range(repeat):
                t = time.perf_counter()
                ledger.claim(source_key=keys, day=day, lease=Lease("bench-scale", 1.0))
                times.append(time.perf_counter() - t)
    times.sort()
    return dict(claim_query_p95_ms=1000 * times[int(0.95 * (len(times) - 1))], claim_query_p50_ms=1000 * statistics.median(times),
                claim_query_n=len(times), sources_per_claim=max(len(v) for v in groups.values()))


def unfinished_sensor_query(config_path: Path) -> float:
    from media_crawler.config import load_config
    from media_crawler.pipeline.unfinished import unfinished_partitions
    from media_crawler.store.ledger import Ledger

    ledger = Ledger(load_config(config_path).ledger_url)
    t = time.perf_counter()
    unfinished_partitions(ledger)
    return (time.perf_counter() - t) * 1000


# --- rows --------------------------------------------------------------------------------

def partitions_of(config_path: Path, days: list[str]) -> list[str]:
    from media_crawler.config import load_config

    config = load_config(config_path)
    return [f"{day}|{shard}" for day in days for shard in config.layout.shard_keys()]


def world_days(world: dict) -> list[str]:
    from datetime import timedelta

    from media_crawler.sim.world import DEFAULT_END_DATE

    return [(DEFAULT_END_DATE - timedelta(days=offset)).isoformat() for offset in reversed(range(world["days"]))]


def production_home(sim: "Sim", workdir: Path, spec: dict) -> tuple[Path, Path]:
    """(sources.yaml, DAGSTER_HOME) of a production-path row: the row's shard count, and
    deploy/dagster.postgres.yaml rendered for its workers."""
    from media_crawler.deploy.workers import WorkerPlan, render_instance_yaml

    config_path = write_config(sim, workdir, spec["workers"], None, spec.get("shards", 1))
    home = workdir / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(render_instance_yaml(REPO / "deploy" / "dagster.postgres.yaml",
                                                            WorkerPlan(spec["workers"])))
    return config_path, home


def daemon_row(name: str, spec: dict, workdir: Path, celery: bool = False) -> dict:
    from dagster import DagsterInstance, RunsFilter

    from media_crawler.commands.crawl import prepare_home
    from media_crawler.config import LEDGER_ENV, load_config
    from media_crawler.deploy.services import ServiceGroup, dagster_env
    from media_crawler.store.ledger import Ledger

    world = WORLDS[spec["world"]]
    days = world_days(world)
    db, url = createdb()
    sim = Sim(workdir, world, LATENCY_MS)
    sampler = CpuSampler(backends=backend_pids(db))
    extra = {"DAGSTER_PG_URL": url, LEDGER_ENV: url, "FB_ACCESS_TOKEN": "scale-token-not-secret"}
    os.environ.update(extra)
    queue = None
    try:
        config_path, home = production_home(sim, workdir, spec)
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
            if spec.get("code_server"):
                sampler.add_session(services.start_code_server(free_port()).pid)
            daemon = services.start_daemon()
            sampler.add_session(daemon.pid)
            sampler.start()
            time.sleep(8)  # the daemon loads the code location; not part of the figures
            cpu0, pg0 = sampler.ticks(), sum(sampler.backend_ticks.values())
            roles0 = sampler.ticks_by_role()
            sim_cpu0 = sim.cpu_ms()
            rates = RateSampler(sim)
            rates.start()
            t0 = time.time()
            _children_cpu_ms()  # from here: the backfill command's CPU alone
            submit = time.perf_counter()
            backfill = subprocess.run([str(BIN / "dagster"), "job", "backfill", "-w", str(services.workspace), "-j", job,
                                       "--partitions", ",".join(partitions), "--noprompt"],
                                      env=env, timeout=600, capture_output=True, text=True)
            submit_s = time.perf_counter() - submit
            if backfill.returncode:
                raise RuntimeError(backfill.stderr[-3000:])
            backfill_cpu = _children_cpu_ms()
            with DagsterInstance.from_config(str(home)) as instance:
                deadline = time.monotonic() + 3600
                while True:
                    services.check_alive()
                    runs = instance.get_runs(filters=RunsFilter(job_name=job))
                    covered = {run.tags.get("dagster/partition") for run in runs}
                    if set(partitions) <= covered and all(run.status.value in ("SUCCESS", "FAILURE", "CANCELED")
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
                      statuses=sorted({r["status"] for r in per_run}), backfill_submit_s=submit_s,
                      crawler_cpu_ms_per_item=(ms(cpu1 - cpu0) + backfill_cpu) / max(items, 1),
                      crawler_cpu_ms_per_item_by_role={**role_ms_per_item(roles0, roles1, items),
                                                       "backfill_command": round(backfill_cpu / max(items, 1), 2)},
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
    from media_crawler.config import LEDGER_ENV, load_config
    from media_crawler.deploy.services import ServiceGroup, dagster_env

    world = WORLDS[spec["world"]]
    db, url = createdb()
    sim = Sim(workdir, world, LATENCY_MS)
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


def _children_cpu_ms() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    value = (usage.ru_utime + usage.ru_stime) * 1000
    previous = getattr(_children_cpu_ms, "previous", 0.0)
    _children_cpu_ms.previous = value
    return value - previous


def _delete_queues(queues) -> None:
    try:
        from kombu import Connection

        with Connection("pyamqp://guest:guest@127.0.0.1:5672//", connect_timeout=5) as connection:
            for queue in queues:
                connection.default_channel.queue_delete(queue)
    except Exception:
        pass


def pg_figures(db: str, per_run: list[dict], items: int) -> dict:
    rows = pg_query(db, "select run_id, count(*), sum(pg_column_size(event)) from event_logs group by run_id")
    by_run = {r[0]: (r[1], int(r[2] or 0)) for r in rows}
    total_rows = sum(v[0] for v in by_run.values())
    total_bytes = sum(v[1] for v in by_run.values())
    table_bytes = pg_query(db, "select pg_total_relation_size('event_logs')")[0][0]
    tasks = pg_query(db, "select count(*), pg_total_relation_size('mc_tasks'), pg_relation_size('mc_tasks'), "
                         "coalesce(avg(pg_column_size(t.*)), 0) from mc_tasks t")[0]
    for run in per_run:
        run["event_log_rows"], run["event_log_bytes"] = by_run.get(run["run_id"], (0, 0))
    # How often each row was written: every UPDATE leaves a dead tuple version behind until vacuum.
    churn = pg_query(db, "select n_tup_ins, n_tup_upd, n_tup_hot_upd, n_dead_tup, n_live_tup from pg_stat_user_tables "
                         "where relname = 'mc_tasks'")
    indexes = pg_query(db, "select indexrelname, pg_relation_size(indexrelid) from pg_stat_user_indexes where relname = 'mc_tasks'")
    return dict(event_log_rows_total=total_rows, event_log_bytes_total=total_bytes,
                event_log_rows_without_run=by_run.get("", (0, 0))[0] + by_run.get(None, (0, 0))[0],
                event_logs_table_bytes=table_bytes,
                event_log_rows_per_10k_items=total_rows * 10_000 / max(items, 1),
                event_log_bytes_per_10k_items=total_bytes * 10_000 / max(items, 1),
                ledger_rows=tasks[0], ledger_bytes_per_row=tasks[1] / max(tasks[0], 1),
                ledger_heap_bytes_per_row=tasks[2] / max(tasks[0], 1), ledger_live_tuple_bytes=float(tasks[3]),
                ledger_churn=dict(zip(("inserts", "updates", "hot_updates", "dead_tuples", "live_tuples"), churn[0])) if churn else {},
                ledger_index_bytes_per_row={name: size / max(tasks[0], 1) for name, size in indexes})


def crawl_row(name: str, spec: dict, workdir: Path) -> dict:
    """`media-crawler crawl` with MEDIA_CRAWLER_HOME only: SQLite ledger, SQLite Dagster instance, files."""
    from dagster import DagsterInstance, RunsFilter
    from sqlalchemy import create_engine

    world = WORLDS[spec["world"]]
    days = world_days(world)
    sim = Sim(workdir, world, LATENCY_MS)
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
        rates = RateSampler(sim)
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


def sensors_row(name: str, spec: dict, workdir: Path) -> dict:
    """One tick of each sensor with 10,000 sources, on PostgreSQL and on SQLite (ledger and instance)."""
    out = dict(row=name, kind="sensors", sources=10_000)
    sources = workdir / "sources10k.yaml"
    # 2,500 accounts per platform = 10,000 sources; --print-sources writes them without serving.
    with open(sources, "w") as handle:
        subprocess.run([str(BIN / "media-crawler"), "sim", "--accounts", "2500", "--days", "4", "--port", "8799",
                        "--print-sources"], stdout=handle, check=True)
    for backend in ("postgres", "sqlite"):
        sub = workdir / backend
        sub.mkdir()
        db = None
        if backend == "postgres":
            db, url = createdb()
        else:
            url = f"sqlite:///{sub / 'ledger.db'}"
        try:
            out[backend] = _time_sensors(sources, sub, url, backend)
        finally:
            if db:
                dropdb(db)
    return out


def _time_sensors(sources: Path, workdir: Path, ledger_url: str, backend: str) -> dict:
    from dagster import DagsterInstance, build_sensor_context

    from media_crawler.config import LEDGER_ENV, load_config
    from media_crawler.defs.jobs import build_automation, build_crawl_job
    from media_crawler.defs.resources import crawl_resources
    from media_crawler.deploy.workers import WorkerPlan, render_instance_yaml

    data = yaml.safe_load(sources.read_text())
    data.setdefault("partitions", {})["shards"] = 16
    data["store"] = str(workdir / "store")
    data["ledger_url"] = ledger_url
    config_path = workdir / "sources.yaml"
    config_path.write_text(yaml.safe_dump(data, sort_keys=False))
    home = workdir / "dagster_home"
    home.mkdir()
    if backend == "postgres":
        os.environ["DAGSTER_PG_URL"] = ledger_url
        (home / "dagster.yaml").write_text(render_instance_yaml(REPO / "deploy" / "dagster.postgres.yaml", WorkerPlan(4)))
    else:
        (home / "dagster.yaml").write_text(render_instance_yaml(REPO / "media_crawler" / "instance" / "dagster.yaml", WorkerPlan(4)))
    os.environ[LEDGER_ENV] = ledger_url
    try:
        config = load_config(config_path)
        layout = config.layout
        _schedule, registration, unfinished = build_automation(layout, build_crawl_job(layout))
        result = dict(sources=len(config.sources), shards=len(layout.shard_keys()))
        with DagsterInstance.from_config(str(home)) as instance:
            for label, sensor_def in (("registration_first", registration), ("registration_steady", registration),
                                      ("registration_steady_2", registration), ("unfinished", unfinished),
                                      ("unfinished_2", unfinished)):
                t = time.perf_counter()
                with build_sensor_context(instance=instance,
                                          resources=crawl_resources(str(config_path))) as context:
                    value = sensor_def(context)
                value = list(value) if not hasattr(value, "skip_message") and isinstance(value, (list, tuple)) else value
                result[f"{label}_s"] = time.perf_counter() - t
                result[f"{label}_result"] = (f"{len(value)} run requests" if isinstance(value, list)
                                              else str(getattr(value, "skip_message", value))[:120])
        return result
    finally:
        os.environ.pop(LEDGER_ENV, None)
        os.environ.pop("DAGSTER_PG_URL", None)


def run_row(name: str, keep: bool = False) -> dict:
    spec = {**ROWS, **EXTRA_ROWS}[name]
    workdir = Path(tempfile.mkdtemp(prefix=f"scale-{name}-", dir="/tmp"))
    started = time.time()
    try:
        if spec["kind"] == "daemon":
            result = daemon_row(name, spec, workdir)
        elif spec["kind"] == "celery":
            result = daemon_row(name, spec, workdir, celery=True)
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
                  latency_ms=LATENCY_MS, api_latency_ms=API_LATENCY_MS, rate_per_platform=RATE, burst_per_platform=BURST,
                  row_seconds=time.time() - started)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=1, default=str))
    return result


def machine() -> str:
    import dagster

    load = os.getloadavg()
    return (f"{host.node()}, {os.cpu_count()} cores shared with others' test runs (load {load[0]:.1f} at start), "
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
            event_rows_per_run=sorted({r.get("event_log_rows", r["events"]) for r in runs}),
            dagster_share_max=max((r["dagster_share"] for r in runs if r["dagster_share"] is not None), default=None),
            dagster_share_max_500=max((r["dagster_share"] for r in big), default=None),
            outside_items_share_max_500=max((r["outside_items_share"] for r in big if r["outside_items_share"] is not None), default=None),
            to_first_item_s_median=statistics.median([r["to_first_item_s"] for r in runs if r["to_first_item_s"] is not None] or [0]),
            wall_s_median=statistics.median([r["wall_s"] for r in runs if r["wall_s"]] or [0]),
        )
    return json.dumps(keep, indent=1, default=str)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--row", action="append", choices=sorted({**ROWS, **EXTRA_ROWS}), help="row to run (repeatable)")
    parser.add_argument("--all", action="store_true", help="every row, in the order of ROWS")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the row's /tmp/scale-* directory")
    args = parser.parse_args(argv)
    if args.list:
        for name, spec in ROWS.items():
            print(name, spec)
        return 0
    names = list(ROWS) if args.all else (args.row or [])
    if not names:
        parser.error("--row NAME or --all")
    failed = []
    for name in names:
        print(f"== {name}", file=sys.stderr, flush=True)
        try:
            print(summary(run_row(name, keep=args.keep)), flush=True)
        except Exception as error:  # the other rows still run
            import traceback

            traceback.print_exc()
            failed.append(f"{name}: {type(error).__name__}: {error}"[:300])
    for line in failed:
        print(f"FAILED {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Scaling benchmark: items/s with 1, 2 and 4 workers against the simulator, with media latency injected.

    .venv/bin/python -m bench scaling [--workers 1,2,4] [--latency-ms 250] [--repeat 3] [--ledgers postgres,sqlite]

Every media answer of the simulator waits --latency-ms first, so the crawl is
I/O-bound as a real one is. A worker here is what `workers: N` means in a
deployment (media_crawler/deploy/workers.py): one process that takes one
partition at a time and runs the four stages on it (the very functions the
Dagster assets call) with the plan's download threads; the partitions are
handed out as the daemon's queue would, at most N at once and at most
`runs_per_platform` per platform. All workers share one ledger, one store and
one rate budget per platform (the `mc_rate_budget` table).

Dagster's own per-run cost (a process per step, ~3 s each on this 2-core
machine, CPU-bound) is left out on purpose: it is constant per partition and
would measure Dagster's process start-up rather than the crawler.

While the crawl runs, the simulator's request counters are sampled every
0.25 s; the highest request count any platform saw in a 1 s window is checked
against that platform's budget (rate x 1 s + burst). Writes bench/SCALING.md.
"""
from __future__ import annotations

import argparse
import os
import platform as host
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from multiprocessing import get_context
from pathlib import Path

import yaml

from bench.instruments import RateSampler
from media_crawler_sim.sources import DEMO_TOKEN_ENV, demo_sources
from media_crawler.deploy.workers import WorkerPlan

# Requests per second and burst per platform: the budget every worker shares.
BUDGETS = {"bilibili": (60.0, 10.0), "weibo": (60.0, 10.0), "facebook": (60.0, 10.0), "urls": (100.0, 10.0)}
# The last row: weibo's budget cut far below what 4 workers would ask of it, to show
# that the one shared budget, not the worker count, decides the rate a platform sees.
HELD = ("weibo", (8.0, 4.0))
SAMPLE_S = 0.25  # the simulator's counters sampled every 0.25 s: the busiest window of >= 1 s is 4 samples


@dataclass
class Result:
    workers: int
    seconds: float
    items: int
    budgets: dict[str, tuple[float, float]]
    peak_per_platform: dict[str, int] = field(default_factory=dict)
    note: str = ""

    def over_budget(self) -> list[str]:
        return [name for name, count in self.peak_per_platform.items() if count > sum(self.budgets[name])]

    @property
    def items_per_s(self) -> float:
        return self.items / self.seconds


# --- in each worker process ----------------------------------------------------------

_RUNTIME = None


def _start_worker(config_path: str, log_path: str) -> None:
    """Build the worker's runtime once (ledger, store, HTTP session, shared budget)."""
    global _RUNTIME
    from media_crawler.config import load_config
    from media_crawler.observe.logging import configure
    from media_crawler.pipeline.runtime import Runtime

    configure(stream=open(f"{log_path}.{os.getpid()}", "a"))  # item events to a file, not the terminal
    _RUNTIME = Runtime.from_config(load_config(config_path))
    # What a process builds on first use (the budget's rows, one client per platform):
    # start-up, like the imports, not crawling.
    for platform in BUDGETS:
        _RUNTIME.adapter(platform)
    _RUNTIME.budget  # noqa: B018 - a cached property: touching it builds it


def _warm_up(_index: int) -> int:
    time.sleep(0.5)  # long enough that every worker process gets one of these
    return os.getpid()


def crawl_partition(source_key: str, day: str) -> int:
    """The four stages on one partition, as the assets run them; returns items committed."""
    from media_crawler.models import DayWindow
    from media_crawler.pipeline.discover import discover
    from media_crawler.pipeline.download import download_partition
    from media_crawler.pipeline.verify_commit import commit_partition, verify_partition

    source, window = _RUNTIME.config.source_by_key(source_key), DayWindow.parse(day)
    try:
        discover(_RUNTIME, source, window)
        download_partition(_RUNTIME, source, window)
        verify_partition(_RUNTIME, source, window)
        commit_partition(_RUNTIME, source, window)
    except Exception as error:  # CrawlError does not survive pickling back to the bench process
        raise RuntimeError(f"{source_key} {day}: {type(error).__name__}: {error}") from None
    return _RUNTIME.ledger.state_counts(source_key=source_key, day=day).get("committed", 0)


# --- in the bench process ---------------------------------------------------------------

def write_config(workdir: Path, base_url: str, workers: int, ledger_url: str, budgets) -> Path:
    data = demo_sources(base_url)
    data.update(workers=workers, store=str(workdir / "store"), ledger_url=ledger_url)
    for name, (rate, burst) in budgets.items():
        data["platforms"].setdefault(name, {}).update(rate=rate, burst=burst)
    path = workdir / "sources.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@contextmanager
def fresh_ledger(workdir: Path, postgres: bool):
    """A ledger URL nobody has used: a SQLite file, or a PostgreSQL database dropped afterwards."""
    if not postgres:
        yield f"sqlite:///{workdir / 'ledger.db'}"
        return
    import psycopg2

    name = f"mc_bench_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(host="127.0.0.1", port=5432, user="postgres", dbname="postgres")
    admin.autocommit = True  # CREATE/DROP DATABASE refuse to run in a transaction
    try:
        with admin.cursor() as cursor:
            cursor.execute(f'CREATE DATABASE "{name}"')
        try:
            yield f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}"
        finally:
            from media_crawler.store.database import dispose_engines

            dispose_engines()
            with admin.cursor() as cursor:
                cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.close()


def run_once(sim, workers: int, days: list[str], workdir: Path, postgres: bool, budgets=BUDGETS) -> Result:
    workdir.mkdir(parents=True)
    with fresh_ledger(workdir, postgres) as ledger_url:
        return _timed_crawl(sim, workers, days, workdir, ledger_url, budgets)


def _timed_crawl(sim, workers: int, days: list[str], workdir: Path, ledger_url: str, budgets) -> Result:
    from media_crawler.config import load_config

    config_path = write_config(workdir, sim.base_url, workers, ledger_url, budgets)
    config = load_config(config_path)
    plan = WorkerPlan(workers)
    # Day-major order mixes the platforms, as a backfill over several sources does.
    queue = [(source.key, day) for day in days for source in config.sources]
    in_flight: dict = {}
    per_platform: dict[str, int] = defaultdict(int)
    items = 0
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn"), initializer=_start_worker,
                             initargs=(str(config_path), str(workdir / "worker.log"))) as pool:
        list(pool.map(_warm_up, range(workers)))  # process start-up and imports stay out of the timing
        sim.app.stats.reset()
        sampler = RateSampler(lambda: sim.app.stats.snapshot()["requests"], tuple(BUDGETS), interval=SAMPLE_S)
        sampler.start()
        started = time.monotonic()
        while queue or in_flight:
            for entry in list(queue):  # the daemon's queue: a free slot, and the platform under its limit
                platform = entry[0].split("-", 1)[0]
                if len(in_flight) < plan.max_concurrent_runs and per_platform[platform] < plan.runs_per_platform:
                    queue.remove(entry)
                    per_platform[platform] += 1
                    in_flight[pool.submit(crawl_partition, *entry)] = platform
            done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
            for future in done:
                per_platform[in_flight.pop(future)] -= 1
                items += future.result()
        seconds = time.monotonic() - started
        sampler.stopping.set()
        sampler.join()
    return Result(workers, seconds, items, dict(budgets), sampler.peaks())


def median_of(runs: list[Result]) -> Result:
    """The run with the median wall time; the busiest second is the worst over all runs."""
    median = sorted(runs, key=lambda run: run.seconds)[len(runs) // 2]
    peaks: dict[str, int] = defaultdict(int)
    for run in runs:
        for name, count in run.peak_per_platform.items():
            peaks[name] = max(peaks[name], count)
    return Result(median.workers, median.seconds, median.items, median.budgets, dict(peaks), median.note)


LEDGER_NAMES = {"postgres": "PostgreSQL (production)", "sqlite": "SQLite in WAL mode (the embedded default)"}


def render(tables: dict[str, list[Result]], args: argparse.Namespace, total_items: int, notes: list[str]) -> str:
    lines = [
        "# Scaling: items/s by number of workers",
        "",
        f"Measured {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC on {host.node()} ({os.cpu_count()} cores, "
        f"Python {host.python_version()}) by `python -m bench scaling --workers {args.workers} --latency-ms {args.latency_ms:g} "
        f"--repeat {args.repeat} --ledgers {args.ledgers}`; each row is the median of {args.repeat} runs.",
        "",
        f"Simulator: seed 1, {args.days} days, 6 demo sources ({total_items} media files in 18 partitions), every "
        f"media answer delayed {args.latency_ms:g} ms. Budgets (requests/s, burst): "
        + ", ".join(f"{name} {rate:g}/{burst:g}" for name, (rate, burst) in BUDGETS.items()) + ".",
        *[f"\n{note}" for note in notes],
    ]
    over = []
    for ledger, results in tables.items():
        base = results[0].items_per_s
        lines += ["", f"## Ledger on {LEDGER_NAMES[ledger]}", "",
                  "| workers | download threads | wall s | items | items/s | vs 1 worker | busiest 1 s per platform (budget: rate + burst) |",
                  "|---|---|---|---|---|---|---|"]
        for result in results:
            peaks = ", ".join(f"{name} {count}/{sum(result.budgets[name]):g}"
                              for name, count in sorted(result.peak_per_platform.items()))
            lines.append(f"| {result.workers}{result.note} | {WorkerPlan(result.workers).total_download_threads} | "
                         f"{result.seconds:.1f} | {result.items} | {result.items_per_s:.1f} | "
                         f"{result.items_per_s / base:.2f}x | {peaks} |")
            over += [f"{ledger} {result.workers}{result.note}: {name}" for name in result.over_budget()]
    lines += ["", f"Every platform within its budget in every run: **{'NO: ' + ', '.join(over) if over else 'yes'}**.",
              "", "Reading it: a partition is the unit a worker takes, and it downloads 4 items at a time, so 4 workers",
              "cannot beat the chain of the largest partitions (13 items: 4 rounds of latency) that the queue reaches",
              "late (about 3.4x is the ceiling with the defaults). The held row is the rate budget at work: weibo's",
              "requests stay at its budget whatever the number of workers. The machine is shared: rows move by",
              "a few tenths between runs when other work competes for its 2 cores.", ""]
    return "\n".join(lines)


def postgres_reachable() -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=1):
            return True
    except OSError:
        return False


def measure(sim, ledger: str, counts: list[int], days: list[str], scratch: Path, args) -> list[Result]:
    results = []
    for workers in counts:
        runs = []
        for attempt in range(args.repeat):
            run = run_once(sim, workers, days, scratch / f"{ledger}-w{workers}-{attempt}", ledger == "postgres")
            print(f"{ledger}, {workers} worker(s): {run.items} items in {run.seconds:.2f} s = "
                  f"{run.items_per_s:.1f} items/s; busiest 1 s: {run.peak_per_platform}", file=sys.stderr)
            runs.append(run)
        results.append(median_of(runs))
    if args.held:
        name, budget = HELD
        held = run_once(sim, max(counts), days, scratch / f"{ledger}-held", ledger == "postgres",
                        {**BUDGETS, name: budget})
        held.note = f" ({name} held to {budget[0]:g}/s, burst {budget[1]:g})"
        results.append(held)
    return results


def main(argv: list[str] | None = None) -> int:
    from media_crawler_sim.app import Behaviour
    from media_crawler_sim.server import Simulator

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2,4", help="comma-separated worker counts (default 1,2,4)")
    parser.add_argument("--days", type=int, default=3, help="days the simulated content is spread over (default 3)")
    parser.add_argument("--latency-ms", type=float, default=250.0, help="delay before every media answer (default 250)")
    parser.add_argument("--ledgers", default="postgres,sqlite",
                        help="ledger databases to measure: postgres (a fresh database per run on 127.0.0.1:5432, "
                             "user postgres) and/or sqlite (default both)")
    parser.add_argument("--no-held", dest="held", action="store_false",
                        help=f"skip the run with {HELD[0]}'s budget cut to {HELD[1][0]:g}/s")
    parser.add_argument("--repeat", type=int, default=3, help="runs per worker count; the median is reported")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("SCALING.md"))
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.workers.split(",")]
    ledgers, notes = args.ledgers.split(","), []
    if "postgres" in ledgers and not postgres_reachable():
        ledgers.remove("postgres")
        notes.append("PostgreSQL was not listening on 127.0.0.1:5432: its table is missing.")
    os.environ.setdefault(DEMO_TOKEN_ENV, "demo-token-not-secret")  # the simulator's Facebook wants a token
    with Simulator(seed=1, days=args.days, port=0, behaviour=Behaviour(media_latency_ms=args.latency_ms)) as sim, \
            tempfile.TemporaryDirectory(prefix="mc-scaling-") as scratch:
        truth = sim.truth()
        tables = {ledger: measure(sim, ledger, counts, truth["days"], Path(scratch), args) for ledger in ledgers}
    report = render(tables, args, len(truth["media"]), notes)
    args.out.write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())

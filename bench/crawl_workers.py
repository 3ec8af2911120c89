"""`media-crawler crawl --workers 4` against `--workers 1`, in the same run, on a generated world.

    .venv/bin/python -m bench crawl_workers [--accounts 8] [--shards 2] [--latency-ms 1000] [--rates default|raised]

The simulator serves a generated world (media_crawler_sim/scale/) whose every media answer waits
--latency-ms first (1 s by default: a slow CDN, where a crawl is waiting, not
working). Each worker count crawls the same day into a fresh home (its own ledger,
store and Dagster home) through the command users run, as a subprocess, timed by
its wall clock. The partitions are the world's sources in `--shards` shards per
platform. `--rates default` keeps every platform's own request budget (the
budget is shared by all workers, so it caps what more workers can gain);
`--rates raised` lifts them out of the way to measure the workers alone.

Checked: both crawls succeed, and their stores hold the same blobs (sha256 names).
Reported: both walls and their ratio (the target: 4 workers <= 0.5x one). Writes
bench/CRAWL_WORKERS.md (appends a row per run, with the workload).
"""
from __future__ import annotations

import argparse
import os
import platform as host
import subprocess
import sys
import tempfile
import time
from datetime import date, datetime, timezone
from pathlib import Path

import yaml

from bench.instruments import load_1min

REPO = Path(__file__).resolve().parents[1]

DAY = date(2026, 11, 27)
RAISED = {"rate": 1000, "burst": 1000}
OUT = Path(__file__).with_name("CRAWL_WORKERS.md")
HEADER = """# `crawl --workers 4` against `--workers 1`

Written by bench/crawl_workers.py (its docstring says how). One row per run; both
crawls of a row ran in that run, one after the other, against the same simulator,
each into a fresh home. `ratio` is wall(4 workers) / wall(1 worker): the target is
<= 0.5. `same store`: both stores hold the same blobs. `load` is the host's 1-minute
load average when the run began (a shared 2-core host: the 4 workers' processes
compete with whatever else runs). `default` rates: the platforms' own budgets, shared
by all workers (Weibo's 3 requests/s is the tightest); `raised`: 1000/s, the workers alone.

| when (UTC) | host | load | world | partitions | media latency | rates | 1 worker | 4 workers | ratio | same store |
|---|---|---|---|---|---|---|---|---|---|---|
"""

def write_config(sim, home: Path, shards: int, rates: str) -> Path:
    from media_crawler_sim.server import write_sources_yaml

    home.mkdir(parents=True)
    path = write_sources_yaml(sim.world, sim.base_url, home / "sources.yaml")
    data = yaml.safe_load(path.read_text())
    data.update(store=str(home / "store"), ledger_url=f"sqlite:///{home / 'ledger.db'}",
                partitions={"shards": shards})
    if rates == "raised":
        for settings in data["platforms"].values():
            settings.update(RAISED)
    path.write_text(yaml.safe_dump(data))
    return path


def crawl(config: Path, home: Path, workers: int) -> float:
    env = {**os.environ, "MEDIA_CRAWLER_HOME": str(home), "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPO))}
    env.pop("DAGSTER_HOME", None)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "media_crawler.cli", "crawl", "--config", str(config),
                           "--day", DAY.isoformat(), "--workers", str(workers)],
                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"crawl --workers {workers} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall


def stored(home: Path) -> set[str]:
    from media_crawler.store.open_store import open_blob_store

    return set(open_blob_store(home / "store").iter_sha256s())


def main(argv: list[str] | None = None) -> int:
    from media_crawler_sim.app import Behaviour
    from media_crawler_sim.scale.options import WorldSize
    from media_crawler_sim.server import Simulator
    from media_crawler_sim.sources import DEMO_TOKEN_ENV

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accounts", type=int, default=8, help="accounts per platform (default 8)")
    parser.add_argument("--shards", type=int, default=2, help="shards per platform: partitions per platform (default 2)")
    parser.add_argument("--latency-ms", type=float, default=1000.0, help="delay before every media answer (default 1000)")
    parser.add_argument("--rates", choices=("default", "raised"), default="default",
                        help="the platforms' own request budgets, or raised to 1000/s (default: default)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    os.environ.setdefault(DEMO_TOKEN_ENV, "demo-token-not-secret")  # the simulator's Facebook wants a token
    size = WorldSize(bilibili_users=args.accounts, weibo_users=args.accounts, facebook_pages=args.accounts,
                     url_lists=args.accounts)
    walls, stores = {}, {}
    load = load_1min()
    with Simulator(seed=1, end_date=DAY, days=1, port=0, behaviour=Behaviour(media_latency_ms=args.latency_ms),
                   size=size) as sim, tempfile.TemporaryDirectory(prefix="mc-crawl-workers-") as scratch:
        posts = sim.truth()["posts"]
        for workers in (1, 4):
            home = Path(scratch) / f"workers{workers}"
            config = write_config(sim, home, args.shards, args.rates)
            walls[workers] = crawl(config, home, workers)
            stores[workers] = stored(home)
            print(f"--workers {workers}: {walls[workers]:.1f} s, {len(stores[workers])} blobs", file=sys.stderr)
    ratio = walls[4] / walls[1]
    same = bool(stores[1]) and stores[1] == stores[4]
    row = (f"| {datetime.now(timezone.utc):%Y-%m-%d %H:%M} | {host.node()} ({os.cpu_count()} cores) | {load:.1f} "
           f"| {args.accounts} accounts x 4 platforms, {posts} posts x 2 media, 1 day | {4 * args.shards} "
           f"| {args.latency_ms:g} ms | {args.rates} | {walls[1]:.1f} s | {walls[4]:.1f} s | **{ratio:.2f}x** "
           f"| {'yes' if same else 'NO'} ({len(stores[1])} blobs) |\n")
    if not args.out.exists():
        args.out.write_text(HEADER)
    with args.out.open("a") as out:
        out.write(row)
    print(row, end="")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

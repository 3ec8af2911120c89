"""The resource bounds the tests used to assert, measured here instead: a test says what
the product does; how fast and how small it does it depends on the machine, so it is
measured on a stated workload and compared with the bound we hold ourselves to.

Workloads (each prints one line: name, measured value, bound, ok/OVER):
- hostile_fetch_rss: `fetch-urls --workers 4 --processes 1 --max-item-bytes 64 MiB` over the
  hostile-media corpus of media_crawler_sim/hostile (real and broken images and videos, a
  2 GiB Content-Length lie, a body that never ends, 512 MiB gzip bombs), announced hashes
  or not; the peak RSS of the fetch-urls process. Bound: 150 MB.
- sim_world: a 10,000-accounts-per-platform simulated world of 30 days (10 posts a day) made,
  and one account's day generated; the Python heap it grew by (tracemalloc). Bound: 4 MiB.
- shard_walk: discovery of one shard of 8 URL feeds whose server answers each after 200 ms;
  the wall time against walking them one after another (1.6 s). Bound: under half of that.

    .venv/bin/python -m bench limits [hostile_fetch_rss] [sim_world] [shard_walk]

hostile_fetch_rss serves the hostile-media corpus the tests judge the crawler on
(media_crawler_sim/hostile), so bench/ imports nothing of the tests.
"""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

# Runs argv[2:] and writes its peak RSS (KiB) to argv[1]. A small process of its own: a
# child forked from a big process starts with that process's RSS counted in its peak
# (ru_maxrss survives exec).
RSS_WRAPPER = """import resource, subprocess, sys
code = subprocess.call(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
open(sys.argv[1], "w").write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(code)
"""


def report(name: str, value: float, bound: float, unit: str) -> bool:
    ok = value < bound
    print(f"{name}: {value:.1f} {unit} (bound {bound:g} {unit}) {'ok' if ok else 'OVER'}")
    return ok


def hostile_fetch_rss() -> bool:
    from media_crawler_sim.hostile.corpus import media_corpus, real_videos
    from media_crawler_sim.hostile.ffmpeg import HOW_TO_INSTALL, find_ffmpeg
    from media_crawler_sim.hostile.server import HostileServer

    ffmpeg = find_ffmpeg()
    if ffmpeg is None:
        print(f"hostile_fetch_rss: no ffmpeg ({HOW_TO_INSTALL})")
        return False
    media_bin = Path(sys.executable).with_name("media-crawler")
    ok = True
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        corpus = {name: (data, kind, verdict)
                  for name, data, kind, verdict in media_corpus(real_videos(ffmpeg, folder))}
        with HostileServer(corpus) as server:
            for with_hashes in (False, True):
                url = server.feed(f"bench-{with_hashes}", with_hashes)
                store, peak_file = folder / f"store-{with_hashes}", folder / f"peak-{with_hashes}"
                subprocess.run([sys.executable, "-c", RSS_WRAPPER, str(peak_file), str(media_bin),
                                "fetch-urls", "--feed", url, "--store", str(store), "--allow-host", url,
                                "--processes", "1", "--workers", "4", "--max-item-bytes", str(64 * 1024**2)],
                               env={**os.environ, "MEDIA_CRAWLER_HOME": str(folder)}, timeout=600)
                peak_mb = int(peak_file.read_text()) / 1024
                ok &= report(f"hostile_fetch_rss ({'announced hashes' if with_hashes else 'no hashes'})",
                             peak_mb, 150, "MB")
    return ok


def sim_world() -> bool:
    from media_crawler_sim.scale.world import BigWorld, WorldSize

    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        world = BigWorld(WorldSize(10_000, 10_000, 10_000, 10_000, posts_per_day=10), seed=7, days=30)
        world.account_day("weibo", 9_876, 29)
        grown = sum(stat.size_diff for stat in tracemalloc.take_snapshot().compare_to(before, "filename"))
    finally:
        tracemalloc.stop()
    return report("sim_world", grown / 2**20, 4, "MiB")


def shard_walk() -> bool:
    import yaml

    from media_crawler.config import load_config
    from media_crawler.models import DayWindow
    from media_crawler.pipeline.discover import discover_sources
    from media_crawler.pipeline.runtime import Runtime

    from bench.instruments import json_server

    answer_s, feeds = 0.2, 8
    with tempfile.TemporaryDirectory() as home, json_server([], delay_s=answer_s) as origin:
        home = Path(home)
        path = home / "sources.yaml"
        path.write_text(yaml.safe_dump({
            "sources": [{"urls": f"{origin}/{n}.json"} for n in range(feeds)], "allow_hosts": [origin],
            "platforms": {"urls": {"rate": 1000, "burst": 1000}}, "store": str(home / "store"),
            "ledger_url": f"sqlite:///{home / 'ledger.db'}"}))
        config = load_config(path)
        runtime = Runtime.from_config(config)
        try:
            started = time.perf_counter()
            discover_sources(runtime, config.sources, DayWindow.parse("2026-11-27"), run_id="bench")
            elapsed = time.perf_counter() - started
        finally:
            runtime.close()
    return report("shard_walk", elapsed, feeds * answer_s / 2, "s")


BENCHES = {"hostile_fetch_rss": hostile_fetch_rss, "sim_world": sim_world, "shard_walk": shard_walk}


def main(argv: list[str]) -> int:
    chosen = argv or list(BENCHES)
    if "--help" in chosen or "-h" in chosen:
        print(__doc__)
        return 0
    unknown = [name for name in chosen if name not in BENCHES]
    if unknown:
        print(f"unknown: {', '.join(unknown)} (choose from {', '.join(BENCHES)})", file=sys.stderr)
        return 2
    os.environ.setdefault("MEDIA_CRAWLER_HOME", tempfile.mkdtemp(prefix="bench-limits-"))
    results = [BENCHES[name]() for name in chosen]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

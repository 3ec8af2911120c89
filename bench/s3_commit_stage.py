"""The commit stage and its blocking check on an s3:// store, on a small crawl of the simulator
into SeaweedFS (127.0.0.1), in one process (no Dagster: the stage functions the assets call).

Each round, a fresh bucket prefix: discover, download and verify the simulator's demo
sources for their days (download_partition, not the Dagster step, which would commit in
place: settle_in_place.py), then time `commit_partition` over every partition (what the
commit stage does with items an older run left verified) and count the S3 requests it
made; then the blocking check (`partition_blob_mismatches`, every commit of this run)
with `rehash_commits: true` (downloads and re-hashes: what the check did before issue
29's fix) and with the default (one HEAD a blob). Prints one row each.

    .venv/bin/python -m bench s3_commit_stage [--days 3] [--rounds 2] [--latency-ms 0]
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

from bench.instruments import load_1min


def _counting(latency_s: float):
    from media_crawler.store.s3 import client as client_module

    sent: Counter = Counter()
    request = client_module.S3Client.request

    def counting(self, method, bucket, key="", **kwargs):
        sent[method] += 1
        if latency_s:
            time.sleep(latency_s)  # a round trip to an endpoint farther than 127.0.0.1
        return request(self, method, bucket, key, **kwargs)

    client_module.S3Client.request = counting
    return sent


def _crawl(sim, server, work: Path, days: int, sent: Counter) -> list[dict]:
    from media_crawler.config import load_config
    from media_crawler.models import DayWindow
    from media_crawler.pipeline.discover import discover
    from media_crawler.pipeline.download import download_partition
    from media_crawler.pipeline.integrity import partition_blob_mismatches
    from media_crawler.pipeline.runtime import Runtime
    from media_crawler.pipeline.verify_commit import commit_partition, verify_partition
    from media_crawler_sim.sources import demo_sources

    data = demo_sources(sim.base_url)
    for settings in data["platforms"].values():
        settings.update(rate=1000, burst=1000)
    data.update(store=server.new_uri(), ledger_url=f"sqlite:///{work / 'ledger.db'}")
    path = work / "sources.yaml"
    path.write_text(yaml.safe_dump(data))
    config = load_config(path)
    runtime = Runtime.from_config(config)
    partitions = [(source, DayWindow.parse(day)) for day in sim.truth()["days"][-days:] for source in config.sources]
    for source, window in partitions:
        discover(runtime, source, window)
        download_partition(runtime, source, window)
        verify_partition(runtime, source, window)
    rows = []
    sent.clear()
    started, committed, size = time.monotonic(), 0, 0
    for source, window in partitions:
        report = commit_partition(runtime, source, window)
        committed += report.ok
        size += report.bytes
    rows.append({"what": "commit", "items": committed, "MB": size / 1e6,
                 "seconds": time.monotonic() - started, "requests": dict(sent)})
    for rehash in (True, False):
        checked = dataclasses.replace(runtime, config=dataclasses.replace(config, rehash_commits=rehash))
        sent.clear()
        started, problems = time.monotonic(), 0
        for source, window in partitions:
            problems += len(partition_blob_mismatches(checked, source, window, rehash_since=0.0))
        rows.append({"what": f"check, rehash_commits={str(rehash).lower()}", "items": committed, "MB": size / 1e6,
                     "seconds": time.monotonic() - started, "requests": dict(sent), "problems": problems})
    runtime.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=3, help="the simulator's last N days, every demo source")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--latency-ms", type=float, default=0.0,
                        help="added to every S3 request, as a remote endpoint's round trip would")
    args = parser.parse_args(argv)

    from media_crawler.store.database import dispose_engines
    from media_crawler_sim.seaweedfs import start_seaweedfs
    from media_crawler_sim.server import Simulator
    from media_crawler_sim.sources import demo_environment

    for name, value in demo_environment().items():
        os.environ.setdefault(name, value)
    server = start_seaweedfs()
    sim = Simulator(seed=1, port=0)
    sim.start()
    try:
        for name, value in server.environment.items():
            os.environ[name] = value
        sent = _counting(args.latency_ms / 1000)
        print(f"load average (1 min) at the start: {load_1min():.1f}; {args.latency_ms:g} ms added per S3 request")
        print("| round | what | items | MB | seconds | S3 requests |")
        print("|---|---|---|---|---|---|")
        for round_ in range(1, args.rounds + 1):
            with tempfile.TemporaryDirectory(prefix="s3-commit-stage-") as work:
                os.environ["MEDIA_CRAWLER_HOME"] = work
                for row in _crawl(sim, server, Path(work), args.days, sent):
                    requests = ", ".join(f"{method} {count}" for method, count in sorted(row["requests"].items()))
                    print(f"| {round_} | {row['what']} | {row['items']} | {row['MB']:.1f} | "
                          f"{row['seconds']:.2f} | {requests} |", flush=True)
                dispose_engines()
        print(f"load average (1 min) at the end: {load_1min():.1f}")
    finally:
        sim.stop()
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

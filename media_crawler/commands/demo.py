"""`media-crawler demo`: a real crawl of the built-in simulator into ./var.

Starts the simulator, writes a sources.yaml pointing every platform at it,
crawls every demo source for the simulator's days through Dagster, prints a
summary, stops the simulator. A second run downloads nothing and says so.
"""
from __future__ import annotations

import argparse
import contextlib
import sys
from collections import Counter
from pathlib import Path

import yaml

from media_crawler.dagster_home import ensure_dagster_home
from media_crawler.environment import HOME_ENV, default_environment, demo_config_path, home_default, set_environment
# The simulator is a package of its own; the commands that run it are its only importers here.
from media_crawler_sim.sources import demo_environment, demo_sources

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--home", default=home_default(), help="where the store, ledger and Dagster home go")
    parser.add_argument("--port", type=int, default=8787, help="simulator port (0: any free port)")
    parser.add_argument("--seed", type=int, default=1)


def start_simulator(port: int, seed: int):
    from media_crawler_sim.server import Simulator

    try:
        sim = Simulator(seed=seed, port=port)
        sim.start()
    except OSError:
        sim = Simulator(seed=seed, port=0)  # the demo port is taken: any free port will do
        sim.start()
    return sim


def run(args: argparse.Namespace) -> int:
    import requests

    from media_crawler.commands.crawl import crawl
    from media_crawler.commands.empty_shards import empty_shards_recorded
    from media_crawler.config import load_config
    from media_crawler.observe.logging import configure
    from media_crawler.observe.progress import default_sinks

    home = Path(args.home).resolve()
    set_environment(HOME_ENV, str(home))
    dagster_home = ensure_dagster_home(home)
    for name, value in demo_environment().items():
        default_environment(name, value)
    log_path = home / "demo" / "crawl.log.jsonl"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # The JSON event stream (ours and Dagster's) goes to a file; the terminal gets the summary.
    with open(log_path, "a") as log_file, contextlib.redirect_stdout(log_file):
        configure(stream=log_file)
        sim = start_simulator(args.port, args.seed)
        try:
            truth = requests.get(f"{sim.base_url}/_sim/truth", timeout=10).json()
            config_path = demo_config_path(home)
            config_path.write_text(yaml.safe_dump(demo_sources(sim.base_url), sort_keys=False))
            before = store_snapshot(home / "store")
            print(f"crawling {len(demo_sources(sim.base_url)['sources'])} demo sources for {', '.join(truth['days'])} "
                  f"from the simulator at {sim.base_url} ...", file=sys.stderr)
            # Progress goes to stderr (when it is a terminal), which the redirect above leaves alone.
            # The demo's shards that hold no source are recorded done, so the UI (`make ui`
            # next) shows only real missing work (commands/empty_shards.py).
            with empty_shards_recorded(load_config(config_path), truth["days"]):
                outcome = crawl(config_path, truth["days"], progress_sinks=default_sinks())
        finally:
            sim.stop()
    after = store_snapshot(home / "store")
    print("\n".join(summary_lines(home, dagster_home, config_path, log_path, outcome, before, after)))
    return 1 if outcome.failed else 0


def store_snapshot(root: Path) -> dict[str, int]:
    from media_crawler.store.open_store import open_blob_store

    store = open_blob_store(root)
    return {sha256: store.size(sha256) for sha256 in store.iter_sha256s()}


def summary_lines(home, dagster_home, config_path, log_path, outcome, before, after) -> list[str]:
    """The demo's closing report; every line is read from where it claims to be (the ledger,
    the store, the run outcomes), and each place is named by what it is."""
    from media_crawler.config import load_config
    from media_crawler.platforms.registry import names as platform_names
    from media_crawler.store.ledger import COMMITTED, Ledger
    from media_crawler.store.reports.reads import failure_counts_by_class, totals_by_platform_kind_state
    from media_crawler.store.urls import display_url

    config = load_config(config_path)
    ledger = Ledger(config.ledger_url)
    committed = Counter()
    for platform, kind, state, count, _size in totals_by_platform_kind_state(ledger):
        if state == COMMITTED:
            committed[(platform, kind)] += count
    new = set(after) - set(before)
    lines = ["", "== media-crawler demo =="]
    for platform in platform_names():
        kinds = ", ".join(f"{committed[(platform, k)]} {k}" for k in ("image", "video", "audio") if committed[(platform, k)])
        lines.append(f"  {platform:<9} {kinds or 'nothing committed'}")
    lines.append(f"  store: {len(after)} blobs, {sum(after.values()) / 1e6:.1f} MB in {config.store_location}")
    if new:
        lines.append(f"  this run: {len(new)} new blobs, {sum(after[name] for name in new) / 1e6:.1f} MB stored")
    else:
        lines.append("  this run: nothing new to download: every item was already seen")
    failures = failure_counts_by_class(ledger)
    lines.append("  items not stored, by class (whole ledger): "
                 + (", ".join(f"{c or 'unknown'}={n}" for c, n in failures) or "none"))
    lines.append(f"  partitions: {len(outcome.partitions) - len(outcome.failed)} ok, {len(outcome.failed)} failed")
    for failed in outcome.failed:
        lines.append(f"    {failed.day} {failed.shard}: {failed.error}")
    lines.append(f"  ledger: {display_url(config.ledger_url)}")
    lines.append(f"  Dagster home (run history): {dagster_home}   JSON logs: {log_path}")
    lines.append(f"  open the UI: media-crawler ui --home {home}   (then http://127.0.0.1:3000)")
    return lines

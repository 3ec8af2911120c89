"""Time `failures`, `status` and a `metrics --once` scrape on a large ledger (issue 16).

    python -m bench ledger_queries NAME=sources.yaml [NAME=sources.yaml ...] [--repeat 3] [--per-query]

Each command runs as a user runs it: `media-crawler <command> --config sources.yaml` in
a subprocess, wall time, median of --repeat runs, with DAGSTER_HOME an empty instance
(status and metrics read its run storage too). --per-query also times each ledger
read in-process (one engine, warm), so a slow command says which query it waits on.
bench/synth_ledger.py fills the ledgers and writes the sources.yaml files.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = (
    ("failures", ["failures"]),
    ("failures --json", ["failures", "--json"]),
    ("status", ["status"]),
    ("status --json", ["status", "--json"]),
    ("metrics --once", ["metrics", "--once"]),
)


PROJECT: Path | None = None  # --project: another checkout's code (e.g. `git archive REV`), same venv


def cli() -> list[str]:
    if PROJECT is not None:
        return [sys.executable, "-m", "media_crawler.cli"]
    script = Path(sys.executable).with_name("media-crawler")
    return [str(script)] if script.exists() else [sys.executable, "-m", "media_crawler.cli"]


def time_command(argv: list[str], config: str, repeat: int, env: dict[str, str]) -> tuple[float, list[float], int]:
    """(median seconds, all runs, bytes of stdout of the last run)."""
    runs, out = [], b""
    for _ in range(repeat):
        started = time.monotonic()
        done = subprocess.run([*cli(), *argv, "--config", config], env=env, capture_output=True, check=False)
        runs.append(time.monotonic() - started)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
        out = done.stdout
    return statistics.median(runs), runs, len(out)


def first_scrapes(config_path: str, count: int, env: dict[str, str]) -> list[tuple[float, str]]:
    """A ledger never folded before (as after a restore): each scrape folds one chunk."""
    from media_crawler.observe.target import observed_config
    from media_crawler.store.ledger import Ledger
    from media_crawler.store.reports.delay_fold import drop_saved_fold

    drop_saved_fold(Ledger(observed_config(config_path).ledger_url).engine)
    result = []
    for _ in range(count):
        started = time.monotonic()
        done = subprocess.run([*cli(), "metrics", "--once", "--config", config_path], env=env, capture_output=True,
                              check=True, text=True)
        seconds = time.monotonic() - started
        line = next((line for line in done.stdout.splitlines()
                     if line.startswith("media_crawler_delay_histograms_complete ")), "? ?")
        result.append((seconds, line.split()[-1]))
    return result


def per_query(config_path: str, repeat: int) -> list[tuple[str, float]]:
    from media_crawler.platforms.registry import names as platform_names
    from media_crawler.store.reports import counts, delay_fold, delays, failures, platform_signals, waiting
    from media_crawler.observe.target import observed_config
    from media_crawler.store.ledger import Ledger

    config = observed_config(config_path)
    engine = Ledger(config.ledger_url).engine
    now = time.time()
    binding = platform_signals.binding_budgets(engine, now)
    reads = [
        ("state_counts", lambda: counts.state_counts(engine)),
        ("backlog", lambda: counts.backlog(engine, now)),
        ("committed_totals(all)", lambda: counts.committed_totals(engine)),
        ("committed_totals(1h)", lambda: counts.committed_totals(engine, since=now - 3600)),
        ("finished_outcomes", lambda: counts.finished_outcomes(engine)),
        ("last_commit_at", lambda: counts.last_commit_at(engine)),
        ("failing_items", lambda: counts.failing_items(engine)),
        ("unresolved_feed_errors", lambda: counts.unresolved_feed_errors(engine)),
        ("platform_health", lambda: platform_signals.platform_health(engine, now, platform_names())),
        ("platform_outage", lambda: platform_signals.platform_outage(engine, now, platform_names())),
        ("expired_leases", lambda: counts.expired_leases(engine, now)),
        ("waiting", lambda: waiting.waiting(engine, now, binding)),
        ("stage_delays", lambda: delays.stage_delays(engine, now)),
        ("delay_histograms(fold kept)", lambda: delay_fold.CommittedDelays(engine).current(now)),
        ("delay_histograms(no fold)", lambda: delay_fold.CommittedDelays(engine, persist=False).current(now)),
        ("failure_report", lambda: failures.failure_report(engine, now=now)),
        ("failure_report(--since 1h)", lambda: failures.failure_report(engine, now=now, since=now - 3600)),
    ]
    result = []
    for name, read in reads:
        runs = []
        for _ in range(repeat):
            started = time.monotonic()
            read()
            runs.append(time.monotonic() - started)
        result.append((name, statistics.median(runs)))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="+", help="NAME=path/to/sources.yaml")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--per-query", action="store_true")
    parser.add_argument("--first-scrapes", type=int, default=0, metavar="N",
                        help="drop the ledger's saved histogram fold, then time N `metrics --once` in a row")
    parser.add_argument("--only", action="append", help="time only these commands (e.g. 'status')")
    parser.add_argument("--project", type=Path, default=None,
                        help="run the commands from this checkout (PYTHONPATH) instead of the installed one")
    args = parser.parse_args(argv)
    global PROJECT
    PROJECT = args.project
    with tempfile.TemporaryDirectory(prefix="mc-bench-dagster-") as home:
        env = {**os.environ, "DAGSTER_HOME": home}
        env.pop("MEDIA_CRAWLER_LEDGER_URL", None)
        if PROJECT is not None:
            env["PYTHONPATH"] = str(PROJECT.resolve())
        print(f"| command | {' | '.join(t.split('=', 1)[0] for t in args.targets)} |")
        print(f"|---|{'---|' * len(args.targets)}")
        for label, command in COMMANDS:
            if args.only and label not in args.only:
                continue
            cells = []
            for target in args.targets:
                _name, config = target.split("=", 1)
                median, runs, size = time_command(command, config, args.repeat, env)
                cells.append(f"{median:.2f} s ({', '.join(f'{r:.2f}' for r in runs)}; {size / 1024:.0f} KiB)")
            print(f"| `{label}` | {' | '.join(cells)} |", flush=True)
    if args.first_scrapes:
        for target in args.targets:
            name, config = target.split("=", 1)
            print(f"\n{name}: `metrics --once` on a ledger whose histogram fold was dropped, scrape by scrape:")
            for scrape, (seconds, complete) in enumerate(first_scrapes(config, args.first_scrapes, env), 1):
                print(f"  scrape {scrape:>2}: {seconds:.2f} s, histograms complete: {complete}", flush=True)
    if args.per_query:
        for target in args.targets:
            name, config = target.split("=", 1)
            print(f"\nper query, {name} (in-process, median of {args.repeat}):")
            for query, seconds in per_query(config, args.repeat):
                print(f"  {query:<32} {seconds * 1000:8.0f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

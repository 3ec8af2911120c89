"""`media-crawler crawl`: register sources and materialize their shard partitions.

For CLI users and CI: a partition is a shard that holds a selected source, on
one day; one Dagster run carries up to `partitions.shards_per_run` consecutive
shards of one platform and day (shards.py `run_ranges`), so Dagster's cost of a
run is paid once for them. A run's steps share one process (the in-process
executor), and `--workers N` runs up to N runs at once (commands/partition_runs.py);
each partition succeeds or fails on its own, and the exit status is non-zero
when any partition failed.
A shard's run works on every source of the shard (media_crawler/shards.py):
`--source` picks the shards to run, not sources within them. Days, shards and
sources are checked before any work (commands/selection.py: a bad one is one
JSON line, exit 2); a source that published nothing on the day is named.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

from media_crawler.commands.partition_runs import PartitionJob, PartitionOutcome, RunJob
from media_crawler.commands.selection import DaySelection, UsageError, check_days, check_shards, check_sources
from media_crawler.config import CrawlConfig, load_config
from media_crawler.environment import config_path_default

__all__ = ["CrawlOutcome", "PartitionOutcome", "crawl", "prepare_home", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=config_path_default(), help="sources.yaml path")
    parser.add_argument("--source", action="append", default=[],
                        help="source key such as bilibili-100000000: runs the shard that holds it "
                             "(default: every shard holding a source; `media-crawler sources` lists them)")
    parser.add_argument("--shard", action="append", default=[], help="shard key such as bilibili-s03 (repeatable)")
    parser.add_argument("--day", action="append", default=[], help="UTC day YYYY-MM-DD (repeatable)")
    parser.add_argument("--days", type=int, default=1, help="the N days up to yesterday (default 1)")
    parser.add_argument("--workers", type=int, default=None,
                        help="partitions run at once, each in its own process "
                             "(default: $MEDIA_CRAWLER_WORKERS, else `workers` of sources.yaml)")


@dataclass
class CrawlOutcome:
    partitions: list[PartitionOutcome] = field(default_factory=list)
    partial_days: list[str] = field(default_factory=list)  # days not over yet (today): their crawl is partial

    @property
    def failed(self) -> list[PartitionOutcome]:
        return [p for p in self.partitions if not p.success]


def prepare_home(instance, config: CrawlConfig) -> list[str]:
    """Check the home's partition layout and register the configured sources in
    the ledger (so the registration sensor does not request them again). A bucket as
    the store is checked first: missing, or refusing our keys, it is one line before
    any run starts (CrawlError)."""
    from media_crawler.pipeline.layout import check_layout
    from media_crawler.store.ledger import Ledger
    from media_crawler.store.open_store import open_blob_store
    from media_crawler.store.source_state import register_sources

    if config.store_url:
        open_blob_store(config.store_location, create=True, local_root=config.store_root)

    ledger = Ledger(config.ledger_url)
    check_layout(ledger, config, instance=instance)
    register_sources(ledger, ((source.key, source.platform) for source in config.sources))
    return [source.key for source in config.sources]


def crawl(config_path: str | Path, days: list[str], source_keys: list[str] | None = None, instance=None,
          raise_on_error: bool = False, progress_sinks: list | None = None,
          shards: list[str] | None = None, workers: int | None = None) -> CrawlOutcome:
    """Run the shard partitions holding `source_keys` (or the given `shards`; default:
    every shard holding a configured source) for each day, up to `workers` at once
    (default: the config's `workers`; one when `instance` is given). Bad days, shards or sources raise UsageError first.
    progress_sinks: where partitions done/total, bytes, rate and ETA go (observe/progress.py)."""
    from media_crawler.commands.partition_runs import run_partitions
    from media_crawler.dagster_home import local_instance
    from media_crawler.observe.progress import Progress
    from media_crawler.recovery.runs import fail_dead_runs
    from media_crawler.shards import run_ranges

    config = load_config(config_path)
    workers = default_workers(config) if workers is None else check_workers(workers)
    selection = check_days(days, 1, config) if days else DaySelection([], [])
    source_keys = check_sources(source_keys or [], config)
    shards = check_shards(shards or [], config)
    # The pool's processes open the instance DAGSTER_HOME names: a caller's own instance runs one at a time.
    workers = workers if instance is None else 1
    instance = instance or local_instance()
    # Runs a killed predecessor left STARTED are failed first, so they read as failed, not running.
    fail_dead_runs(instance)
    keys = prepare_home(instance, config)
    selected = set(shards) | {config.layout.shard_of(key) for key in (source_keys or ([] if shards else keys))}
    holding = {shard: tuple(members) for shard, members in config.layout.group(keys).items()}
    grouped = {shard: members for shard, members in sorted(holding.items()) if shard in selected}
    jobs = [RunJob(day, tuple(PartitionJob(shard, day, holding.get(shard, ())) for shard in shards))
            for day in selection.days for shards in run_ranges(config.layout, grouped, holding)]
    jobs.sort(key=_platforms_alternate(jobs))
    progress = Progress("crawl", len(grouped) * len(selection.days), unit="partitions", sinks=progress_sinks or [])
    outcome = CrawlOutcome(partial_days=selection.partial)

    def done(partition: PartitionOutcome) -> None:
        if partition.shard in grouped:
            progress.advance(bytes=partition.committed_bytes)

    # A shard a run steps over (it holds no source) is not reported: it was not asked for.
    outcome.partitions = sorted(
        (partition for partition in run_partitions(config_path, instance, jobs, workers, raise_on_error=raise_on_error,
                                                   on_done=done) if partition.shard in grouped),
        key=lambda partition: (partition.day, partition.shard))
    progress.close()
    return outcome


def default_workers(config: CrawlConfig) -> int:
    """As the daemon's plan reads it (deploy/workers.py): MEDIA_CRAWLER_WORKERS, else `workers:`."""
    from media_crawler.config import ConfigError
    from media_crawler.environment import workers_override
    from media_crawler.deploy.workers import MAX_WORKERS, WorkerPlan

    override = workers_override()
    if not override:
        return config.workers
    try:
        return WorkerPlan(int(override)).workers
    except ValueError:
        raise ConfigError(f"MEDIA_CRAWLER_WORKERS must be a whole number from 1 to {MAX_WORKERS}, "
                          f"not {override!r}") from None


def check_workers(workers: int) -> int:
    from media_crawler.deploy.workers import MAX_WORKERS

    if not 1 <= workers <= MAX_WORKERS:
        raise UsageError(f"--workers must be from 1 to {MAX_WORKERS}, not {workers}")
    return workers


def _platforms_alternate(jobs: list[RunJob]):
    """Order runs so that ones running at once are of different platforms where they can
    be: each platform's rate budget is shared by every worker, so two runs of one
    platform side by side wait for each other's tokens, and runs of two do not."""
    from media_crawler.shards import shard_platform

    rank: dict[tuple[str, str], int] = {}
    seen: dict[tuple[str, str], int] = {}
    for job in jobs:
        platform = (job.day, shard_platform(job.shards[0]))
        rank[(job.day, job.shards[0])] = seen.get(platform, 0)
        seen[platform] = rank[(job.day, job.shards[0])] + 1
    return lambda job: (job.day, rank[(job.day, job.shards[0])], job.shards[0])


def outcome_lines(outcome: CrawlOutcome) -> list[str]:
    """What a person reads after a crawl: one line per partition, then what was empty or partial."""
    lines = []
    for partition in outcome.partitions:
        status = "ok" if partition.success else "FAILED"
        lines.append(f"{partition.day} {partition.shard} ({len(partition.sources)} source(s)): {status} "
                     f"run {partition.run_id} {partition.error}".rstrip())
        if partition.empty_sources:
            lines.append(f"  nothing published on {partition.day} by {len(partition.empty_sources)} of "
                         f"{len(partition.sources)} source(s): {' '.join(partition.empty_sources)}")
    for day in outcome.partial_days:
        lines.append(f"{day} is today (UTC): the day is not over, so its crawl is partial; crawl it again tomorrow")
    if not outcome.partitions:
        lines.append("no partition to crawl: no configured source (add sources to sources.yaml; "
                     "`media-crawler sources` lists them)")
    return lines


def run(args: argparse.Namespace) -> int:
    from media_crawler.commands.empty_shards import empty_shards_recorded
    from media_crawler.observe.logging import configure
    from media_crawler.observe.progress import default_sinks

    configure()
    config = load_config(args.config)
    # Checked here too, before the empty shards' thread touches the Dagster home.
    days = check_days(args.day, args.days, config).days
    check_sources(args.source, config)
    check_shards(args.shard, config)
    if args.workers is not None:
        check_workers(args.workers)
    with empty_shards_recorded(config, days):
        outcome = crawl(args.config, days, args.source, progress_sinks=default_sinks(), shards=args.shard or None,
                        workers=args.workers)
    for line in outcome_lines(outcome):
        print(line, file=sys.stderr)
    return 1 if outcome.failed else 0

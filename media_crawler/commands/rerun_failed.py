"""`media-crawler rerun-failed [--since 24h] [--dry-run]`: run again what did not finish.

What it picks up:
- partitions whose latest Dagster run failed, among runs updated within --since
  (a partition that failed and later succeeded, or is running now, is skipped);
- partitions whose ledger still holds unfinished items, whatever Dagster says
  (a run killed before it could fail, items left by a restore).
Runs that a killed process left STARTED are marked failed first (recovery/runs.py),
so they count as failed instead of blocking the partition as "running".

Why a fresh, full-partition run instead of Dagster's "re-execute from failure":
every stage redoes only the partition's unfinished rows (the ledger says which),
so re-running the whole partition costs one walk of the feed and no-op stages
for what is done; it needs no reconstructable job and no `__main__` guard, it
works for runs started by `dagster asset materialize` (which have no remote
origin, so GraphQL re-execution refuses them), and the partition tag is set
explicitly (re-execution does not inherit it). The runs are the ones
`media-crawler crawl` makes: the partitions of one day and platform to re-run
share runs of up to `partitions.shards_per_run` consecutive shards, and a run
steps over no partition that was not asked for unless it holds no source
(shards.py `run_ranges`), so re-running a failed partition redoes only it.
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from media_crawler.config import load_config
from media_crawler.environment import config_path_default

_SPAN = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=config_path_default(), help="sources.yaml path")
    parser.add_argument("--since", default="24h", type=parse_span,
                        help="failed runs updated within this span: 90m, 24h, 7d (default 24h)")
    parser.add_argument("--dry-run", action="store_true", help="list what would be re-run, run nothing")


def parse_span(text: str) -> timedelta:
    match = _SPAN.match(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"not a span: {text!r} (use e.g. 90m, 24h, 7d)")
    return timedelta(seconds=float(match.group(1)) * _UNIT_S[match.group(2)])


@dataclass
class Rerun:
    shard: str
    day: str
    reasons: list[str] = field(default_factory=list)


def plan_reruns(instance, config, since: timedelta) -> tuple[list[Rerun], list[str]]:
    """(partitions to re-run, notes about partitions left alone)."""
    from media_crawler.defs.partitions import split_partition_key
    from media_crawler.shards import is_shard_key
    from media_crawler.store.reports.reads import unfinished_partition_counts as unfinished_partitions
    from media_crawler.recovery.runs import failed_partitions, in_flight_partitions
    from media_crawler.store.ledger import Ledger

    known = {source.key for source in config.sources}
    shards = set(config.layout.group(known))
    busy = in_flight_partitions(instance, config.layout.shard_keys())
    plans: dict[tuple[str, str], Rerun] = {}
    notes: list[str] = []

    def add(shard: str, day: str, reason: str) -> None:
        partition = f"{day}|{shard}"
        if shard not in shards:
            notes.append(f"{partition}: no source of {config.path} is in this shard; skipped")
        elif partition in busy:
            notes.append(f"{partition}: a run is queued or in progress; skipped")
        else:
            plans.setdefault((shard, day), Rerun(shard, day)).reasons.append(reason)

    for failed in failed_partitions(instance, datetime.now(timezone.utc) - since, config.layout.shard_keys()):
        if "|" not in failed.partition or not is_shard_key(failed.partition.split("|", 1)[1]):
            continue  # a run of a per-source partition, before `upgrade-home`
        shard, window = split_partition_key(failed.partition)
        add(shard, window.day.isoformat(), f"latest run {failed.run_id[:8]} failed")
    for source_key, day, count in unfinished_partitions(Ledger(config.ledger_url)):
        if source_key not in known:
            notes.append(f"{day}|{source_key}: {count} unfinished item(s) of a source not in {config.path}; skipped")
            continue
        add(config.layout.shard_of(source_key), day, f"{count} unfinished item(s) of {source_key} in the ledger")
    return sorted(plans.values(), key=lambda plan: (plan.day, plan.shard)), notes


def rerun(config_path: str, instance=None, since: timedelta = timedelta(hours=24), dry_run: bool = False,
          out=None) -> int:
    from media_crawler.dagster_home import local_instance
    from media_crawler.commands.crawl import crawl
    from media_crawler.recovery.runs import fail_dead_runs

    out = out or sys.stderr
    config = load_config(config_path)
    instance = instance or local_instance()
    for run in fail_dead_runs(instance):
        print(f"run {run.run_id[:8]} ({describe_run_partitions(run.tags)}): its process is gone; "
              "marked failed", file=out)
    plans, notes = plan_reruns(instance, config, since)
    for note in notes:
        print(note, file=out)
    if not plans:
        print("nothing to re-run", file=out)
        return 0
    if dry_run:
        for plan in plans:
            print(f"would re-run {plan.day} {plan.shard}: {'; '.join(plan.reasons)}", file=out)
        return 0
    failed = 0
    for day in sorted({plan.day for plan in plans}):
        of_day = {plan.shard: plan for plan in plans if plan.day == day}
        for outcome in crawl(config_path, [day], shards=sorted(of_day), instance=instance).partitions:
            failed += not outcome.success
            status = "ok" if outcome.success else f"FAILED {outcome.error}"
            print(f"re-ran {day} {outcome.shard} ({'; '.join(of_day[outcome.shard].reasons)}): {status} "
                  f"run {outcome.run_id}", file=out)
    return 1 if failed else 0


def describe_run_partitions(tags) -> str:
    """A run's partition, or the first and last of its range."""
    from media_crawler.shards import partitions_of_run

    keys = partitions_of_run(tags)
    return "?" if not keys else keys[0] if len(keys) == 1 else f"{keys[0]} to {keys[-1]}"


def run(args: argparse.Namespace) -> int:
    from media_crawler.observe.logging import configure

    configure()
    return rerun(args.config, since=args.since, dry_run=args.dry_run)

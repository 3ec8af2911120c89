"""`media-crawler crawl`: register sources as partitions and materialize them.

For CLI users and CI: no manual `add_dynamic_partitions` step, one Dagster run
per partition (in-process executor: steps of one partition share a process),
exit status non-zero when any partition failed.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from media_crawler.config import CONFIG_ENV, CrawlConfig, load_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=os.environ.get(CONFIG_ENV, "sources.yaml"), help="sources.yaml path")
    parser.add_argument("--source", action="append", default=[], help="source key (default: every source)")
    parser.add_argument("--day", action="append", default=[], help="UTC day YYYY-MM-DD (repeatable)")
    parser.add_argument("--days", type=int, default=1, help="the N days up to yesterday (default 1)")


@dataclass
class PartitionOutcome:
    source_key: str
    day: str
    success: bool
    run_id: str
    error: str = ""


@dataclass
class CrawlOutcome:
    partitions: list[PartitionOutcome] = field(default_factory=list)

    @property
    def failed(self) -> list[PartitionOutcome]:
        return [p for p in self.partitions if not p.success]


def register_sources(instance, config: CrawlConfig) -> list[str]:
    from media_crawler.defs.partitions import source_partitions

    keys = [source.key for source in config.sources]
    known = set(instance.get_dynamic_partitions(source_partitions.name))
    missing = [key for key in keys if key not in known]
    if missing:
        instance.add_dynamic_partitions(source_partitions.name, missing)
    return keys


def crawl(config_path: str | Path, days: list[str], source_keys: list[str] | None = None, instance=None,
          raise_on_error: bool = False, progress_sinks: list | None = None) -> CrawlOutcome:
    """progress_sinks: where partitions done/total, bytes, rate and ETA go (observe/progress.py)."""
    from dagster import DagsterInstance, materialize

    from media_crawler.defs.partitions import partition_key
    from media_crawler.defs.resources import CrawlerResource
    from media_crawler.definitions import CRAWL_ASSETS
    from media_crawler.observe.progress import Progress

    from media_crawler.recovery.runs import fail_dead_runs, process_tags

    config = load_config(config_path)
    instance = instance or DagsterInstance.get()
    # Runs a killed predecessor left STARTED are failed first, so they read as failed, not running.
    fail_dead_runs(instance)
    keys = register_sources(instance, config)
    selected = [key for key in keys if not source_keys or key in source_keys]
    unknown = set(source_keys or []) - set(keys)
    if unknown:
        raise SystemExit(f"unknown source(s): {', '.join(sorted(unknown))}; known: {', '.join(keys)}")
    resource = CrawlerResource(config_path=str(Path(config_path).resolve()))
    outcome = CrawlOutcome()
    progress = Progress("crawl", len(days) * len(selected), unit="partitions", sinks=progress_sinks or [])
    for day in days:
        for key in selected:
            result = materialize(CRAWL_ASSETS, partition_key=partition_key(key, day), instance=instance,
                                 resources={"crawler": resource}, raise_on_error=raise_on_error,
                                 tags={"media_crawler/source": key, "media_crawler/day": day, **process_tags()})
            error = ""
            if not result.success:
                failures = [event for event in result.all_events if event.is_step_failure]
                error = "; ".join(str(event.step_failure_data.error.message).strip()[:300] for event in failures)
            outcome.partitions.append(PartitionOutcome(key, day, result.success, result.run_id, error))
            progress.advance(bytes=_committed_bytes(result))
    progress.close()
    return outcome


def _committed_bytes(result) -> int:
    """Bytes the partition's committed_media materialization reports (0 when it did not materialize)."""
    total = 0
    for materialization in result.asset_materializations_for_node("committed_media"):
        value = materialization.metadata.get("bytes")
        total += int(getattr(value, "value", value) or 0)
    return total


def resolve_days(explicit: list[str], count: int) -> list[str]:
    if explicit:
        return [date.fromisoformat(day).isoformat() for day in explicit]
    yesterday = datetime.now(timezone.utc).date() - timedelta(days=1)
    return [(yesterday - timedelta(days=offset)).isoformat() for offset in reversed(range(count))]


def run(args: argparse.Namespace) -> int:
    from media_crawler.observe.logging import configure
    from media_crawler.observe.progress import default_sinks

    configure()
    days = resolve_days(args.day, args.days)
    outcome = crawl(args.config, days, args.source, progress_sinks=default_sinks())
    for partition in outcome.partitions:
        status = "ok" if partition.success else "FAILED"
        print(f"{partition.day} {partition.source_key}: {status} run {partition.run_id} {partition.error}",
              file=sys.stderr)
    return 1 if outcome.failed else 0

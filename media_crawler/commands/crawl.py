"""`media-crawler crawl`: register sources and materialize their shard partitions.

For CLI users and CI: one Dagster run per partition, that is per shard that
holds a selected source, per day (in-process executor: the steps of one
partition share a process); exit status non-zero when any partition failed.
A shard's run works on every source of the shard (media_crawler/shards.py):
`--source` picks the shards to run, not sources within them.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from media_crawler.config import CrawlConfig, config_path_default, load_config
from media_crawler.scrub import excerpt


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=config_path_default(), help="sources.yaml path")
    parser.add_argument("--source", action="append", default=[],
                        help="source key: runs the shard that holds it (default: every shard holding a source)")
    parser.add_argument("--shard", action="append", default=[], help="shard key such as bilibili-s03 (repeatable)")
    parser.add_argument("--day", action="append", default=[], help="UTC day YYYY-MM-DD (repeatable)")
    parser.add_argument("--days", type=int, default=1, help="the N days up to yesterday (default 1)")


@dataclass
class PartitionOutcome:
    shard: str
    day: str
    success: bool
    run_id: str
    error: str = ""
    sources: tuple[str, ...] = ()  # the source keys the shard holds


@dataclass
class CrawlOutcome:
    partitions: list[PartitionOutcome] = field(default_factory=list)

    @property
    def failed(self) -> list[PartitionOutcome]:
        return [p for p in self.partitions if not p.success]


def prepare_home(instance, config: CrawlConfig) -> list[str]:
    """Check the home's partition layout and register the configured sources in
    the ledger (so the registration sensor does not request them again)."""
    from media_crawler.pipeline.layout import check_layout
    from media_crawler.store.ledger import Ledger
    from media_crawler.store.source_state import register_sources

    ledger = Ledger(config.ledger_url)
    check_layout(ledger, config, instance=instance)
    register_sources(ledger, ((source.key, source.platform) for source in config.sources))
    return [source.key for source in config.sources]


def crawl(config_path: str | Path, days: list[str], source_keys: list[str] | None = None, instance=None,
          raise_on_error: bool = False, progress_sinks: list | None = None,
          shards: list[str] | None = None) -> CrawlOutcome:
    """Run the shard partitions holding `source_keys` (or the given `shards`; default:
    every shard holding a configured source) for each day.
    progress_sinks: where partitions done/total, bytes, rate and ETA go (observe/progress.py)."""
    from dagster import materialize

    from media_crawler.dagster_home import local_instance
    from media_crawler.defs.partitions import partition_key
    from media_crawler.defs.resources import crawl_resources
    from media_crawler.definitions import crawl_assets_for
    from media_crawler.observe.progress import Progress

    from media_crawler.recovery.runs import fail_dead_runs, process_tags

    config = load_config(config_path)
    instance = instance or local_instance()
    # Runs a killed predecessor left STARTED are failed first, so they read as failed, not running.
    fail_dead_runs(instance)
    keys = prepare_home(instance, config)
    unknown = set(source_keys or []) - set(keys)
    if unknown:
        raise SystemExit(f"unknown source(s): {', '.join(sorted(unknown))}; known: {', '.join(keys)}")
    selected = set(shards or ()) | {config.layout.shard_of(key) for key in (source_keys or ([] if shards else keys))}
    shards = {shard: tuple(members) for shard, members in sorted(config.layout.group(keys).items()) if shard in selected}
    assets = crawl_assets_for(config)
    resources = crawl_resources(str(Path(config_path).resolve()))
    outcome = CrawlOutcome()
    progress = Progress("crawl", len(days) * len(shards), unit="partitions", sinks=progress_sinks or [])
    for day in days:
        for shard, members in shards.items():
            result = materialize(assets, partition_key=partition_key(shard, day), instance=instance,
                                 resources=resources, raise_on_error=raise_on_error,
                                 tags={"media_crawler/shard": shard, "media_crawler/day": day, **process_tags()})
            error = ""
            if not result.success:
                failures = [event for event in result.all_events if event.is_step_failure]
                error = "; ".join(excerpt(str(event.step_failure_data.error.message).strip(), 300) for event in failures)
            outcome.partitions.append(PartitionOutcome(shard, day, result.success, result.run_id, error, members))
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
    outcome = crawl(args.config, days, args.source, progress_sinks=default_sinks(), shards=args.shard or None)
    for partition in outcome.partitions:
        status = "ok" if partition.success else "FAILED"
        print(f"{partition.day} {partition.shard} ({len(partition.sources)} source(s)): {status} "
              f"run {partition.run_id} {partition.error}",
              file=sys.stderr)
    return 1 if outcome.failed else 0

"""`media-crawler reshard [--dry-run]`: apply a changed `partitions.shards` of sources.yaml.

Changing the shard count re-groups sources into partitions; it is an explicit
step because runs, the sensors and the UI must all agree on it (until it is
done they refuse, naming this command). Nothing is downloaded again: a
source's items stay under its own key in the ledger, so the first run of its
new shard finds them committed. Refused while a run is queued or in progress.
Reload the code location (or restart the webserver and daemon) afterwards, so
the UI shows the new shard keys.
"""
from __future__ import annotations

import argparse
import sys

from media_crawler.config import ConfigError, load_config
from media_crawler.environment import config_path_default


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=config_path_default(), help="sources.yaml path")
    parser.add_argument("--dry-run", action="store_true", help="say what would change, change nothing")


def run(args: argparse.Namespace, instance=None, out=None) -> int:
    from media_crawler.dagster_home import local_instance
    from media_crawler.pipeline.layout import check_layout, old_source_partitions, reshard
    from media_crawler.recovery.runs import in_flight_partitions
    from media_crawler.shards import PartitionLayout
    from media_crawler.store.ledger import Ledger
    from media_crawler.store.schema import LEGACY_LAYOUT
    from media_crawler.store.source_state import recorded_layout

    out = out or sys.stdout
    config = load_config(args.config)
    instance = instance or local_instance()
    ledger = Ledger(config.ledger_url)
    before = recorded_layout(ledger)
    if LEGACY_LAYOUT in before or (not before and old_source_partitions(instance)):
        raise ConfigError("this home still has per-source partitions: run `media-crawler upgrade-home` first")
    if before == config.layout.as_record():
        print(f"nothing to do: this home is laid out with {config.layout.describe()} shards", file=out)
        return 0
    busy = in_flight_partitions(instance)
    if busy:
        raise ConfigError(f"{len(busy)} run(s) are queued or in progress ({', '.join(sorted(busy)[:3])}); "
                          "wait for them (or cancel them) before resharding")
    if args.dry_run:
        old = PartitionLayout(start_day=config.layout.start_day, shards=tuple(sorted(before.items())))
        moved = sum(1 for source in config.sources if old.shard_of(source) != config.layout.shard_of(source))
        print(f"would reshard {_describe(before)} -> {config.layout.describe()}: {moved} of "
              f"{len(config.sources)} source(s) change shard; nothing is downloaded", file=out)
        return 0
    change = reshard(ledger, config)
    check_layout(ledger, config, instance=instance)
    print(f"resharded {_describe(change.before)} -> {config.layout.describe()}: {change.sources_moved} of "
          f"{len(config.sources)} source(s) changed shard; nothing was downloaded. Reload the code location "
          "so the UI shows the new shard keys.", file=out)
    return 0


def _describe(shards: dict[str, int]) -> str:
    return ", ".join(f"{platform} {count}" for platform, count in sorted(shards.items())) or "(none recorded)"

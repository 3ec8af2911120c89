"""`media-crawler upgrade-home`: move a home made with per-source partitions to shards.

Homes made before shards partitioned by source × day, which passes Dagster's
recommended 100,000 partitions per asset at about 40 sources. This command:
records the shard layout of sources.yaml in the ledger, registers every source
the ledger holds items of, and deletes the old `sources` partition set from the
Dagster instance. Nothing is downloaded again and no ledger row changes: items
are keyed by their platform identity, never by partition. The old runs and
materializations stay in Dagster's storage as history, under the old keys.
Until it has run, runs, sensors and commands refuse the home, naming it.
"""
from __future__ import annotations

import argparse
import sys

from media_crawler.config import ConfigError, load_config
from media_crawler.environment import config_path_default


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=config_path_default(), help="sources.yaml path")


def run(args: argparse.Namespace, instance=None, out=None) -> int:
    from media_crawler.dagster_home import local_instance
    from media_crawler.pipeline.layout import check_layout, old_source_partitions, upgrade_home
    from media_crawler.recovery.runs import in_flight_partitions
    from media_crawler.store.ledger import Ledger
    from media_crawler.store.schema import LEGACY_LAYOUT
    from media_crawler.store.source_state import recorded_layout

    out = out or sys.stdout
    config = load_config(args.config)
    instance = instance or local_instance()
    ledger = Ledger(config.ledger_url)
    old_partitions = old_source_partitions(instance)
    legacy = LEGACY_LAYOUT in recorded_layout(ledger)
    if not legacy and not old_partitions:
        print("nothing to do: this home uses shard partitions", file=out)
        return 0
    busy = in_flight_partitions(instance)
    if busy:
        raise ConfigError(f"{len(busy)} run(s) are queued or in progress; wait for them before upgrading the home")
    change = upgrade_home(ledger, config, instance)
    check_layout(ledger, config, instance=instance)
    print(f"upgraded: {len(old_partitions)} per-source partition key(s) removed from Dagster, "
          f"{change.sources_registered} source(s) registered, shards {config.layout.describe()}; nothing was "
          "downloaded. Reload the code location so the UI shows the shard partitions.", file=out)
    return 0

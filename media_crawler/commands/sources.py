"""`media-crawler sources [--config sources.yaml] [--json]`: the configured sources' keys, shards and platforms.

The keys are what `crawl --source`, `failures` and the ledger name a source by
(such as bilibili-100000000); the shards are what `crawl --shard` and Dagster's
partitions are made of. One line per source, in the order of sources.yaml.
"""
from __future__ import annotations

import argparse
import json
import sys

from media_crawler.config import load_config
from media_crawler.environment import config_path_default


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=config_path_default(), help="sources.yaml path")
    parser.add_argument("--json", action="store_true", help="one JSON object per source on stdout")


def source_rows(config) -> list[dict]:
    return [{"key": source.key, "shard": config.layout.shard_of(source), "platform": source.platform,
             "source": f"{source.kind} {source.ident}"} for source in config.sources]


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    rows = source_rows(config)
    if args.json:
        for row in rows:
            print(json.dumps(row, ensure_ascii=False))
        return 0
    width = max((len(row["key"]) for row in rows), default=3)
    print(f"{'key':<{width}}  {'shard':<14} {'platform':<9} source")
    for row in rows:
        print(f"{row['key']:<{width}}  {row['shard']:<14} {row['platform']:<9} {row['source']}")
    shards = {row["shard"] for row in rows}
    print(f"{len(rows)} source(s) in {len(shards)} shard(s) of {len(config.layout.shard_keys())} "
          f"({config.layout.describe()})", file=sys.stderr)
    return 0

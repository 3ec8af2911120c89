"""Shards that hold no source are done, not missing work.

Every shard of the layout is a partition, whether or not a configured source
hashes into it (shards.py). A shard holding none has nothing to crawl, and a
run of it would do nothing; without a materialization Dagster's UI shows it
"Missing" for ever, beside the partitions that really lack a crawl. `crawl`
records one runless materialization per asset for each such partition of the
days it crawls (once: partitions already materialized are left alone). A
source added later into such a shard is crawled for those days by naming them
(`crawl --day`), as for any day crawled before the source was added.
"""
from __future__ import annotations

from typing import Iterable

from media_crawler.config import CrawlConfig

STAGE_ASSETS = ("media_records", "media_downloads", "verified_media", "committed_media")


def empty_shards(config: CrawlConfig) -> list[str]:
    holding = config.layout.group(source.key for source in config.sources)
    return [shard for shard in config.layout.shard_keys() if shard not in holding]


def record_empty_shards(instance, config: CrawlConfig, days: Iterable[str]) -> int:
    """Mark the empty shards' partitions of `days` materialized; returns how many partitions it marked."""
    from dagster import AssetKey, AssetMaterialization

    from media_crawler.defs.partitions import partition_string

    done = instance.get_materialized_partitions(AssetKey(STAGE_ASSETS[-1]))
    wanted = [partition_string(shard, day) for day in days for shard in empty_shards(config)]
    missing = [partition for partition in wanted if partition not in done]
    for asset in STAGE_ASSETS:
        for partition in missing:
            instance.report_runless_asset_event(AssetMaterialization(
                asset_key=asset, partition=partition,
                metadata={"sources": 0, "note": "this shard holds no configured source: nothing to crawl"}))
    return len(missing)

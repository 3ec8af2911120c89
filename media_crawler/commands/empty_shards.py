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

import logging
import threading
from contextlib import contextmanager
from typing import Iterable, Iterator

from media_crawler.config import CrawlConfig

LOG = logging.getLogger("media_crawler.crawl")
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


@contextmanager
def empty_shards_recorded(config: CrawlConfig, days: Iterable[str]) -> Iterator[None]:
    """Record the empty shards of `days` on a thread while the crawl's partitions run.

    Dagster writes one runless event per partition and asset, ~70 ms each on its SQLite
    storage (a commit each): a demo's 58 empty shards are 16 s of mostly waiting on the
    disk, hidden behind the crawl instead of added to it. A failure here is logged, not
    raised: the crawl's own outcome does not depend on it."""
    from media_crawler.dagster_home import local_instance

    days = list(days)
    instance = local_instance()  # here, not on the thread: the first use makes the Dagster home

    def record() -> None:
        try:
            with instance:
                record_empty_shards(instance, config, days)
        except Exception as exc:  # noqa: BLE001 - the partitions' outcome is what the crawl reports
            LOG.warning("empty shards not recorded: %s: %s", type(exc).__name__, exc)

    thread = threading.Thread(target=record, name="empty-shards", daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()

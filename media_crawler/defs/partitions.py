"""Partitions: shard × publication day (media_crawler/shards.py says why shards).

Both dimensions come from the `partitions:` section of sources.yaml: the shard
keys (`bilibili-s00` ... per platform) and the first day. Days are UTC
publication days. Which sources a shard holds is derived from their keys at
run time, so adding a source changes no partition.
"""
from __future__ import annotations

from functools import lru_cache

from dagster import DailyPartitionsDefinition, MultiPartitionKey, MultiPartitionsDefinition, StaticPartitionsDefinition

from media_crawler.models import DayWindow
from media_crawler.shards import PartitionLayout

SHARD = "shard"
DAY = "day"


@lru_cache(maxsize=16)
def crawl_partitions(layout: PartitionLayout) -> MultiPartitionsDefinition:
    # end_offset=1 makes today a valid partition: a crawl of "today so far" is useful.
    days = DailyPartitionsDefinition(start_date=layout.start_day.isoformat(), end_offset=1)
    return MultiPartitionsDefinition({DAY: days, SHARD: StaticPartitionsDefinition(layout.shard_keys())})


def partition_key(shard: str, day: str) -> MultiPartitionKey:
    return MultiPartitionKey({SHARD: shard, DAY: day})


def split_partition_key(key) -> tuple[str, DayWindow]:
    """(shard, window) from a MultiPartitionKey or its string form 'day|shard'."""
    if hasattr(key, "keys_by_dimension"):
        dims = key.keys_by_dimension
        return dims[SHARD], DayWindow.parse(dims[DAY])
    day, shard = str(key).split("|", 1)
    return shard, DayWindow.parse(day)


def partition_string(shard: str, day: str) -> str:
    """The key as Dagster's run tags and the CLI spell it."""
    return f"{day}|{shard}"

"""Partitions: source × publication day.

Sources are a dynamic dimension registered from sources.yaml (by the
`source_registration_sensor`, or by `media-crawler crawl` for CLI users), so
adding a source is a config change. Days are UTC publication days.
"""
from __future__ import annotations

from dagster import DailyPartitionsDefinition, DynamicPartitionsDefinition, MultiPartitionKey, MultiPartitionsDefinition

from media_crawler.models import DayWindow

SOURCES_PARTITION_SET = "sources"
source_partitions = DynamicPartitionsDefinition(name=SOURCES_PARTITION_SET)
# end_offset=1 makes today a valid partition: a crawl of "today so far" is useful.
day_partitions = DailyPartitionsDefinition(start_date="2020-01-01", end_offset=1)
crawl_partitions = MultiPartitionsDefinition({"day": day_partitions, "source": source_partitions})


def partition_key(source_key: str, day: str) -> MultiPartitionKey:
    return MultiPartitionKey({"source": source_key, "day": day})


def split_partition_key(key) -> tuple[str, DayWindow]:
    """(source_key, window) from a MultiPartitionKey or its string form 'day|source'."""
    if hasattr(key, "keys_by_dimension"):
        dims = key.keys_by_dimension
        return dims["source"], DayWindow.parse(dims["day"])
    day, source = str(key).split("|", 1)
    return source, DayWindow.parse(day)

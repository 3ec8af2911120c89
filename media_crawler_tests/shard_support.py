"""Tests reach the sensors and schedule through the layout their sources.yaml gives."""
from __future__ import annotations

from media_crawler.config import load_config
from media_crawler.defs.jobs import build_automation, build_crawl_job


def automation(config_path):
    """(daily_crawl_schedule, source_registration_sensor, unfinished_partitions_sensor) for a config."""
    layout = load_config(config_path).layout
    return build_automation(layout, build_crawl_job(layout))


def unfinished_sensor(config_path):
    return automation(config_path)[2]


def registration_sensor(config_path):
    return automation(config_path)[1]


def demo_layout():
    """The layout of every test config built on the demo's sources.yaml."""
    from media_crawler_sim.sources import demo_sources
    from media_crawler.config import config_from_dict

    return config_from_dict(demo_sources("http://127.0.0.1:1")).layout


def partition_of(day: str, source_key: str, layout=None) -> str:
    """'day|shard' of the partition holding a source (the demo's layout unless given)."""
    return f"{day}|{(layout or demo_layout()).shard_of(source_key)}"


def one_source_per_shard(entries: list[dict], layout=None) -> list[dict]:
    """The sources.yaml entries, with URL-list feeds given a query the simulator ignores
    until no two sources share a shard: tests that read one partition per source.
    (A URL list's key hashes its URL, and the simulator's port is random.)"""
    from media_crawler.platforms.registry import parse_source

    layout = layout or demo_layout()
    for attempt in range(1000):
        spread = [{**entry, "urls": f"{entry['urls']}?spread={attempt}"} if "urls" in entry and attempt else entry
                  for entry in entries]
        shards = [layout.shard_of(parse_source(*next((k, v) for k, v in entry.items() if k != "api"))) for entry in spread]
        if len(set(shards)) == len(shards):
            return spread
    raise AssertionError("no spread of these sources over distinct shards")


def requested_partitions(request) -> list[str]:
    """The 'day|shard' keys a RunRequest asks for: its partition, or every key of its range."""
    from media_crawler.shards import partitions_of_run

    return [str(request.partition_key)] if request.partition_key else partitions_of_run(request.tags)

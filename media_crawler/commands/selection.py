"""What a command was asked to work on (days, shards, sources), checked before any work.

A bad value is the user's mistake, not the crawler's: it raises UsageError,
which cli.report_failure turns into one JSON line on stderr (`usage_error`,
exit 2) naming the value, what a good one looks like, and where to find them.
Days are checked against the partition range Dagster would refuse later
(DagsterUnknownPartitionError): from `partitions.start_day` to today (UTC).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Iterable

from media_crawler.config import CrawlConfig
from media_crawler.shown import shown, shown_some

USAGE_ERROR_CLASS = "usage_error"
SOURCE_KEY_EXAMPLE = "bilibili-100000000"
SOURCE_KEY_FORM = (f"a source key is <platform>-<id>, such as {SOURCE_KEY_EXAMPLE}; "
                   "`media-crawler sources` lists them")


class UsageError(ValueError):
    """A command-line value the command cannot act on (exit 2, class usage_error)."""

    error_class = USAGE_ERROR_CLASS


@dataclass(frozen=True)
class DaySelection:
    days: list[str]
    partial: list[str]  # days in `days` that are not over yet (today, UTC): their crawl sees only a part


def utc_today() -> date:
    return datetime.now(timezone.utc).date()


def check_days(explicit: Iterable[str], count: int, config: CrawlConfig, today: date | None = None) -> DaySelection:
    """--day values (YYYY-MM-DD, from start_day to today), else the `count` days up to yesterday."""
    today = today or utc_today()
    start = config.layout.start_day
    if explicit:
        days = [_one_day(text, start, today) for text in explicit]
    else:
        if count < 1:
            raise UsageError(f"--days must be 1 or more, not {count}")
        yesterday = today - timedelta(days=1)
        days = [yesterday - timedelta(days=offset) for offset in reversed(range(count))]
        if days[0] < start:
            raise UsageError(f"--days {count} reaches {days[0].isoformat()}, before partitions.start_day "
                             f"{start.isoformat()}; at most {max((yesterday - start).days + 1, 0)} day(s) here")
    unique = list(dict.fromkeys(day.isoformat() for day in days))
    return DaySelection(unique, [day for day in unique if day == today.isoformat()])


def _one_day(text: str, start: date, today: date) -> date:
    try:
        day = date.fromisoformat(text) if len(text) == 10 else None
    except ValueError:
        day = None
    if day is None:
        raise UsageError(f"--day {shown(text)} is not a day: write it as YYYY-MM-DD (UTC), such as "
                         f"{(today - timedelta(days=1)).isoformat()}")
    if day < start:
        raise UsageError(f"--day {text} is before partitions.start_day {start.isoformat()} (sources.yaml): "
                         "no partition holds it")
    if day > today:
        raise UsageError(f"--day {text} is in the future (today is {today.isoformat()} UTC): nothing is published yet")
    return day


def check_sources(keys: Iterable[str], config: CrawlConfig) -> list[str]:
    """--source values: each a key of a configured source."""
    keys = list(dict.fromkeys(keys))
    known = {source.key for source in config.sources}
    unknown = [key for key in keys if key not in known]
    if unknown:
        listing = f"configured: {shown_some(known)}" if known else "no source is configured"
        raise UsageError(f"unknown source(s) {shown_some(unknown)}: {SOURCE_KEY_FORM} ({listing})")
    return keys


def check_shards(shards: Iterable[str], config: CrawlConfig) -> list[str]:
    """--shard values: each a shard of the layout that holds at least one configured source."""
    shards = list(dict.fromkeys(shards))
    holding = config.layout.group(source.key for source in config.sources)
    layout_keys = set(config.layout.shard_keys())
    for shard in shards:
        if shard not in layout_keys:
            platform = shard.rsplit("-s", 1)[0]
            count = config.layout.shard_count(platform) if platform in dict(config.layout.shards) else 0
            scope = (f"{platform} has {count} shard(s), {shard_range(platform, config)}" if count
                     else f"shards are <platform>-sNN, for {', '.join(p for p, _ in config.layout.shards)}")
            raise UsageError(f"no shard {shown(shard)}: {scope}; `media-crawler sources` shows which hold sources")
        if shard not in holding:
            raise UsageError(f"shard {shard} holds no configured source (shards holding sources: "
                             f"{shown_some(holding) if holding else 'none'}); `media-crawler sources` lists them")
    return shards


def shard_range(platform: str, config: CrawlConfig) -> str:
    keys = [key for key in config.layout.shard_keys() if key.rsplit("-s", 1)[0] == platform]
    return f"{keys[0]} to {keys[-1]}" if len(keys) > 1 else keys[0]

"""How sources are grouped into partitions: a fixed number of stable shards per platform.

A partition is (shard, day), not (source, day): with thousands of sources a
per-source dimension would pass Dagster's recommended 100,000 partitions per
asset within weeks (docs/SHARDS.md). A source's shard is derived from its key
alone (sha256 of the key, modulo the platform's shard count), so adding a
source never moves another one, and nothing about a source is stored in
Dagster: the ledger keeps its items and feed state under the source's own key,
so changing the shard count re-groups sources without downloading anything.

Partition counts per asset: platforms x shards x days since `start_day`.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import date
from typing import Iterable, Mapping, Sequence, TypeVar

from media_crawler.models import Source
from media_crawler.platforms.registry import names as platform_names
from media_crawler.shown import shown, shown_some

DEFAULT_SHARDS = 16
# Fixed, so the day dimension never moves under an existing home; operators set their own.
DEFAULT_START_DAY = date(2026, 1, 1)
MAX_SHARDS = 1000
# Consecutive shards of one platform and day one run carries (docs/SHARDS.md: a run of
# the default 4 holds one to two minutes of work, and Dagster's 2.5-4 s per run is 2-5 % of it).
DEFAULT_SHARDS_PER_RUN = 4
MAX_SHARDS_PER_RUN = 64
S = TypeVar("S", Source, str)
_SHARD_MARK = "-s"


@dataclass(frozen=True)
class PartitionLayout:
    """The `partitions:` section of sources.yaml."""

    start_day: date = DEFAULT_START_DAY
    # Every registered platform (platforms/registry.py), DEFAULT_SHARDS each.
    shards: tuple[tuple[str, int], ...] = field(
        default_factory=lambda: tuple((platform, DEFAULT_SHARDS) for platform in platform_names()))
    shards_per_run: int = DEFAULT_SHARDS_PER_RUN

    def shard_count(self, platform: str) -> int:
        return dict(self.shards).get(platform, DEFAULT_SHARDS)

    def shard_of(self, source: Source | str) -> str:
        """The shard key of a source (or of a source key): `bilibili-s07`."""
        key = source.key if isinstance(source, Source) else source
        platform = key.split("-", 1)[0]
        count = self.shard_count(platform)
        index = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % count
        return shard_key(platform, index, count)

    def shard_keys(self) -> list[str]:
        return [shard_key(platform, index, count) for platform, count in self.shards for index in range(count)]

    def group(self, sources: Iterable[S]) -> dict[str, list[S]]:
        """Sources (or source keys) by the shard that holds them, in their given order."""
        grouped: dict[str, list[S]] = {}
        for source in sources:
            grouped.setdefault(self.shard_of(source), []).append(source)
        return grouped

    def as_record(self) -> dict[str, int]:
        """What the ledger records of a layout: the shard counts (the start day moves no data)."""
        return dict(self.shards)

    def describe(self) -> str:
        return ", ".join(f"{platform} {count}" for platform, count in self.shards)


def shard_key(platform: str, index: int, count: int) -> str:
    return f"{platform}{_SHARD_MARK}{index:0{max(2, len(str(count - 1)))}d}"


def shard_platform(shard: str) -> str:
    return shard.rsplit(_SHARD_MARK, 1)[0]


def is_shard_key(text: str) -> bool:
    platform, mark, index = text.rpartition(_SHARD_MARK)
    return bool(mark) and platform in platform_names() and index.isdigit()


def layout_from_raw(raw: object, platforms: Sequence[str] | None = None) -> PartitionLayout:
    """Parse `partitions: {start_day: 2026-01-01, shards: 16 | {bilibili: 32, ...}}`.
    Raises ValueError with a one-line reason; config.py turns it into a ConfigError.
    `platforms`: the registered ones (platforms/registry.py) unless given."""
    platforms = tuple(platform_names() if platforms is None else platforms)
    if raw is None:
        return PartitionLayout()
    if not isinstance(raw, Mapping):
        raise ValueError("'partitions' must be a mapping such as {start_day: 2026-01-01, shards: 16}")
    unknown = [key for key in raw if key not in ("start_day", "shards", "shards_per_run")]
    if unknown:
        raise ValueError(f"unknown key(s) {shown_some(unknown)} in partitions (known: shards, shards_per_run, start_day)")
    per_run = raw.get("shards_per_run", DEFAULT_SHARDS_PER_RUN)
    if isinstance(per_run, bool) or not isinstance(per_run, int) or not 1 <= per_run <= MAX_SHARDS_PER_RUN:
        raise ValueError(f"partitions.shards_per_run must be a whole number from 1 to {MAX_SHARDS_PER_RUN}, "
                         f"not {shown(per_run)}")
    start_day = raw.get("start_day", DEFAULT_START_DAY)
    if isinstance(start_day, str):
        try:
            start_day = date.fromisoformat(start_day)
        except ValueError:
            raise ValueError(f"partitions.start_day must be a day such as 2026-01-01, not {shown(start_day)}") from None
    if not isinstance(start_day, date):
        raise ValueError(f"partitions.start_day must be a day such as 2026-01-01, not {shown(start_day)}")
    shards = raw.get("shards", DEFAULT_SHARDS)
    if isinstance(shards, Mapping):
        unknown = [name for name in shards if name not in platforms]
        if unknown:
            raise ValueError(f"partitions.shards names unknown platform(s) {shown_some(unknown)}")
        counts = {platform: shards.get(platform, DEFAULT_SHARDS) for platform in platforms}
    else:
        counts = {platform: shards for platform in platforms}
    for platform, count in counts.items():
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_SHARDS:
            raise ValueError(f"partitions.shards for {platform} must be a whole number from 1 to {MAX_SHARDS}, "
                             f"not {shown(count)}")
    return PartitionLayout(start_day=start_day, shards=tuple(counts.items()), shards_per_run=per_run)


def run_ranges(layout: PartitionLayout, wanted: Iterable[str], holding: Iterable[str]) -> list[tuple[str, ...]]:
    """The `wanted` shards grouped into runs of consecutive shards of one platform, at most
    `layout.shards_per_run` keys long, in layout order. A run may step over a shard that is
    not wanted only when that shard holds no source (`holding`: the shards that do): running
    it walks no feed, while running a shard that holds sources it was not asked for would
    walk their feeds again (a re-run of one failed partition redoes only that partition)."""
    wanted, holding = set(wanted), set(holding)
    ranges: list[tuple[str, ...]] = []
    for platform, count in layout.shards:
        keys = [shard_key(platform, index, count) for index in range(count)]
        current: list[str] = []
        for key in keys:
            if key in wanted and current and len(current) < layout.shards_per_run:
                current.append(key)
            elif key in wanted:
                if current:
                    ranges.append(_trimmed(current, wanted))
                current = [key]
            elif key not in holding and current and len(current) < layout.shards_per_run:
                current.append(key)  # an empty shard between two wanted ones
            elif current:
                ranges.append(_trimmed(current, wanted))
                current = []
        if current:
            ranges.append(_trimmed(current, wanted))
    return ranges


def _trimmed(keys: list[str], wanted: set[str]) -> tuple[str, ...]:
    while keys[-1] not in wanted:
        keys = keys[:-1]
    return tuple(keys)


def shards_between(first: str, last: str) -> list[str]:
    """The shard keys from `first` to `last`, both included (one platform; [] otherwise)."""
    platform, _, start = first.rpartition(_SHARD_MARK)
    other, _, end = last.rpartition(_SHARD_MARK)
    if platform != other or not start.isdigit() or not end.isdigit():
        return []
    return [f"{platform}{_SHARD_MARK}{index:0{len(start)}d}" for index in range(int(start), int(end) + 1)]


# Dagster's run tags for one partition, and for a range of them (its first and last key).
PARTITION_TAG = "dagster/partition"
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"


def partitions_of_run(tags: Mapping[str, str], shard_order: Sequence[str] | None = None) -> list[str]:
    """The partition keys ('day|shard') a run carries, from its tags: one, a range (days x
    shards: Dagster's range of a two-dimension partition is a rectangle), or none.
    `shard_order`: the layout's shard keys, for a range a person launched across platforms
    (ours never cross one; without the order such a range reads as its two ends)."""
    if tags.get(PARTITION_TAG):
        return [tags[PARTITION_TAG]]
    start, end = tags.get(RANGE_START_TAG, ""), tags.get(RANGE_END_TAG, "")
    if "|" not in start or "|" not in end:
        return []
    (first_day, first_shard), (last_day, last_shard) = start.split("|", 1), end.split("|", 1)
    try:
        day, last = date.fromisoformat(first_day), date.fromisoformat(last_day)
    except ValueError:
        return []
    days = []
    while day <= last:
        days.append(day.isoformat())
        day = date.fromordinal(day.toordinal() + 1)
    shards = shards_between(first_shard, last_shard)
    if not shards and shard_order and first_shard in shard_order and last_shard in shard_order:
        shards = list(shard_order)[list(shard_order).index(first_shard):list(shard_order).index(last_shard) + 1]
    shards = shards or [first_shard, last_shard]
    return [f"{day}|{shard}" for day in days for shard in dict.fromkeys(shards)]


def range_tags(day: str, shards: Sequence[str]) -> dict[str, str]:
    """The tags of a run of `shards` (consecutive, one platform) on `day`."""
    return {RANGE_START_TAG: f"{day}|{shards[0]}", RANGE_END_TAG: f"{day}|{shards[-1]}"}

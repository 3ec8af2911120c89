"""Does this home's ledger agree with the partition layout of sources.yaml?

Every run, sensor and command that maps sources to partitions checks first.
A fresh home records the layout it is first used with. Two cases are refused,
each with the one command that resolves it:
- a home made with one partition per source (before shards): its ledger had
  rows when it was upgraded to schema 4 (store/database.py marks it), or its
  Dagster instance still holds the old `sources` partitions: `media-crawler upgrade-home`;
- a home laid out with other shard counts than sources.yaml now asks for:
  `media-crawler reshard`. Both download nothing: items are keyed by their
  platform identity in the ledger, never by shard.
"""
from __future__ import annotations

from dataclasses import dataclass

from media_crawler.config import ConfigError, CrawlConfig
from media_crawler.store.ledger import Ledger
from media_crawler.store.schema import LEGACY_LAYOUT
from media_crawler.store.source_state import record_first_layout, record_layout, recorded_layout, register_sources, sources_with_items

# The dynamic partition set a home made before shards registered its sources in.
OLD_SOURCES_PARTITION_SET = "sources"


class LayoutError(ConfigError):
    """The home and sources.yaml disagree about partitions (a configuration matter: exit 2)."""


def old_source_partitions(instance) -> list[str]:
    if instance is None:
        return []
    try:
        return list(instance.get_dynamic_partitions(OLD_SOURCES_PARTITION_SET))
    except Exception:  # noqa: BLE001 - an instance that cannot answer has none
        return []


def check_layout(ledger: Ledger, config: CrawlConfig, *, instance=None, shard: str | None = None) -> None:
    wanted = config.layout.as_record()
    recorded = recorded_layout(ledger)
    if LEGACY_LAYOUT in recorded or (not recorded and old_source_partitions(instance)):
        raise LayoutError("this home was made with one partition per source (before shards); run "
                              "`media-crawler upgrade-home` once to move it to shard partitions (downloads nothing)")
    if not recorded:
        recorded = record_first_layout(ledger, wanted)
    if recorded != wanted:
        raise LayoutError(f"{config.path or 'sources.yaml'} asks for shards ({_describe(wanted)}) but this home is laid "
                          f"out with ({_describe(recorded)}); run `media-crawler reshard` to re-group its sources "
                          "(downloads nothing), or restore the old counts")
    if shard is not None and shard not in config.layout.shard_keys():
        raise LayoutError(f"partition shard {shard!r} is not in the layout of {config.path or 'sources.yaml'} "
                          f"({_describe(wanted)}); reload the code location after changing the shard count")


def _describe(shards: dict[str, int]) -> str:
    return ", ".join(f"{platform} {count}" for platform, count in sorted(shards.items()))


@dataclass
class Relayout:
    before: dict[str, int]
    after: dict[str, int]
    sources_moved: int
    sources_registered: int


def upgrade_home(ledger: Ledger, config: CrawlConfig, instance) -> Relayout:
    """Move a home made with per-source partitions to shards: record the layout and
    the sources the ledger knows, and drop the old `sources` partition set from the
    Dagster instance (its runs and materializations stay as history)."""
    known = sources_with_items(ledger)
    new = register_sources(ledger, [*known, *((source.key, source.platform) for source in config.sources)])
    for key in old_source_partitions(instance):
        instance.delete_dynamic_partition(OLD_SOURCES_PARTITION_SET, key)
    record_layout(ledger, config.layout.as_record())  # replaces the per-source marker
    return Relayout({}, config.layout.as_record(), sources_moved=0, sources_registered=len(new))


def reshard(ledger: Ledger, config: CrawlConfig) -> Relayout:
    """Record the shard counts sources.yaml asks for. Nothing else changes: a source's
    items stay under its key, so the next run of its new shard finds them done."""
    from media_crawler.shards import PartitionLayout

    before = recorded_layout(ledger)
    old = PartitionLayout(start_day=config.layout.start_day, shards=tuple(sorted(before.items())))
    moved = sum(1 for source in config.sources if before and old.shard_of(source) != config.layout.shard_of(source))
    record_layout(ledger, config.layout.as_record())
    return Relayout(before, config.layout.as_record(), sources_moved=moved, sources_registered=0)

"""Which sources a stage works on: one source, a shard's sources, or every source (None)."""
from __future__ import annotations

from typing import Sequence, Union

from media_crawler.models import Source

Sources = Union[Source, Sequence[Source], None]


def as_list(sources: Sources) -> list[Source] | None:
    if sources is None:
        return None
    return [sources] if isinstance(sources, Source) else list(sources)


def source_keys(sources: Sources) -> str | list[str] | None:
    """The ledger filter for the scope (store/ledger.py where_sources)."""
    listed = as_list(sources)
    return None if listed is None else [source.key for source in listed]

"""Partitions whose ledger rows are not finished: what the re-request sensor and
`media-crawler rerun-failed` act on."""
from __future__ import annotations

from media_crawler.store.ledger import Ledger
from media_crawler.store.reports.reads import unfinished_partition_counts


def unfinished_partitions(ledger: Ledger) -> list[tuple[str, str, int]]:
    """(source_key, day, unfinished item count), oldest day first."""
    return unfinished_partition_counts(ledger)

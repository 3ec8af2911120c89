"""A URL list through all four stages in one process, without Dagster.

The stages are the pipeline's own (discover, download, verify, commit); only
the orchestration differs: one call instead of four assets.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from media_crawler.config import CrawlConfig
from media_crawler.errors import CrawlError
from media_crawler.models import DayWindow, Source
from media_crawler.pipeline.discover import discover
from media_crawler.pipeline.download import download_partition
from media_crawler.pipeline.runtime import Runtime
from media_crawler.pipeline.verify_commit import commit_partition, verify_partition
from media_crawler.store.ledger import FINISHED_STATES


@dataclass
class ListSummary:
    states: dict[str, int] = field(default_factory=dict)
    downloaded_bytes: int = 0
    feed_error: str | None = None

    @property
    def complete(self) -> bool:
        return self.feed_error is None and all(state in FINISHED_STATES for state in self.states)

    def line(self) -> str:
        states = ", ".join(f"{state}={count}" for state, count in sorted(self.states.items()))
        text = f"fetch-urls: {states or 'no items'}; {self.downloaded_bytes / 1e6:.1f} MB downloaded"
        return text + (f"; feed failed: {self.feed_error}" if self.feed_error else "")


def fetch_list(config: CrawlConfig, source: Source, window: DayWindow, workers: int = 8) -> ListSummary:
    runtime = Runtime.from_config(config)
    summary = ListSummary()
    try:
        discover(runtime, source, window)
    except CrawlError as error:
        summary.feed_error = f"{error.error_class.value}: {error.message}"
    # Items of earlier runs over the same list (other days) count too: every day of the source.
    download = download_partition(runtime, source, None, workers=workers, ignore_backoff=True)
    summary.downloaded_bytes = download.bytes
    verify_partition(runtime, source, None)
    commit_partition(runtime, source, None)
    summary.states = runtime.ledger.state_counts()
    return summary

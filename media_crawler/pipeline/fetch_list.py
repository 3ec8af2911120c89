"""A URL list through all four stages without Dagster, in one process or several.

The stages are the pipeline's own (discover, download, verify, commit); only
the orchestration differs. Under Dagster each stage is an asset that runs over
the whole partition before the next starts. Here verify and commit are
pipelined per item inside the download worker (`after_download`): a file is
checked and linked into the store while it is still in the page cache, and
the row's transitions downloading → downloaded → verified → committed land
together in the download stage's batched ledger writes (one executemany per
100 items), and the item gets one log line that gives every stage's outcome
(observe/events.py `one_line_for_stages`; a new item gets no fetch line).

Downloads can be spread over processes (pipeline/shard_processes.py): the
interpreter, not the network, is what runs out first on thousands of small
files. Afterwards the ordinary verify and commit stages run over the list's
rows, so rows an interrupted earlier run (or a Dagster run) left downloaded or
verified are finished too.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, ContextManager

from media_crawler.config import CrawlConfig
from media_crawler.download.media_transport import MediaTransport
from media_crawler.errors import CrawlError
from media_crawler.models import DayWindow, Source
from media_crawler.pipeline.discover import discover
from media_crawler.pipeline.runtime import LedgerOpening, Runtime
from media_crawler.store.states import FINISHED_STATES


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


def fetch_list(config: CrawlConfig, source: Source, window: DayWindow, workers: int = 8, processes: int = 1,
               child_logging: Callable[[], ContextManager[None]] | None = None) -> ListSummary:
    """Every item of the list through the four stages.

    workers: downloads in flight in all; processes: how many processes share
    them (pipeline/shard_processes.py), each with workers/processes threads.
    child_logging: the log stream setup a forked process runs first.

    The first request, the feed's, goes out before the ledger is open: the ledger
    opens in a thread of its own (SQLAlchemy's import and the schema are most of
    the command's start-up), started as that request goes out (pipeline/runtime.py
    LedgerOpening: before, it only took turns at the interpreter lock with the work
    leading to the request), and discover waits for it at its first row, after the
    first page is in. What comes after the feed (the download engine, Pillow) is
    imported after it (issue 31; media_crawler_tests/commands/test_fetch_urls_startup.py).
    """
    threads = max(1, -(-workers // max(1, processes)))
    runtime = _list_runtime(config, threads, LedgerOpening(config.ledger_url))
    summary = ListSummary()
    try:
        discover(runtime, source, window, new_item_lines=False)
    except CrawlError as error:
        summary.feed_error = f"{error.error_class.value}: {error.message}"
    from media_crawler.pipeline.list_downloads import download_list

    summary.downloaded_bytes = download_list(runtime, source, workers, processes, child_logging,
                                             child_runtime=lambda: _list_runtime(config, threads))
    summary.states = runtime.ledger.state_counts()
    return summary


def _list_runtime(config: CrawlConfig, threads: int, ledger=None) -> Runtime:
    """The runtime of one process of the list; `ledger`: one already opening (the parent's)."""
    # A connection per request in flight: a pool smaller than the threads would
    # open (and throw away) a new connection for every request past its size.
    # The media transport alone: the list's feed goes over it too (the urls spec's
    # plain_api), so fetch-urls never imports requests (issue 31's start-up).
    return Runtime.from_config(config, ledger=ledger, session=MediaTransport(pool_size=max(16, 2 * threads)))

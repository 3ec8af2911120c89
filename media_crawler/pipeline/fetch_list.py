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
from media_crawler.errors import CrawlError
from media_crawler.sessions import make_session
from media_crawler.models import DayWindow, Source
from media_crawler.pipeline.discover import discover
from media_crawler.pipeline.download import Workers, download_partition
from media_crawler.pipeline.runtime import Runtime
from media_crawler.pipeline.settle_in_place import verify_and_commit
from media_crawler.pipeline.shard_processes import ShardProcesses
from media_crawler.pipeline.verify_commit import commit_partition, verify_partition
from media_crawler.store.ledger import CLAIM_LIMIT, FINISHED_STATES


# A list item still failing after the stage's in-step attempts (4, with
# backoff) gets one more pass when the pass got other items through:
# a transient fault that hit one item four times in a row is rare, but in a
# list of thousands it happens.
EXTRA_PASSES = 1


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
    """
    threads = max(1, -(-workers // max(1, processes)))
    runtime = _list_runtime(config, threads)
    summary = ListSummary()
    try:
        discover(runtime, source, window, new_item_lines=False)
    except CrawlError as error:
        summary.feed_error = f"{error.error_class.value}: {error.message}"
    if processes > 1:
        def download_shard(shard: tuple[int, int]) -> int:  # in a forked child: its own connections
            return _download_pass(_list_runtime(config, threads), source, threads, shard).bytes

        with ShardProcesses(download_shard, processes, child_logging) as children:
            summary.downloaded_bytes += _download_pass(runtime, source, threads, (0, processes)).bytes
        summary.downloaded_bytes += children.bytes
    # Then passes over the whole list (all threads here): what a single process
    # downloads, the rows past one claim's limit, items a first pass left
    # waiting for a retry, and the rows of a shard process that died.
    retry_passes_left = EXTRA_PASSES
    while True:
        download = _download_pass(runtime, source, workers, None)
        summary.downloaded_bytes += download.bytes
        claimed = download.extra.get("items_claimed", 0)
        if not claimed:
            break  # nothing left to hand out
        if claimed >= CLAIM_LIMIT:
            continue  # more of the list waits to be claimed
        if not download.still_unfinished or not download.ok or not retry_passes_left:
            break  # finished, or nothing got through this pass: do not insist
        retry_passes_left -= 1
    verify_partition(runtime, source, None)
    commit_partition(runtime, source, None)
    summary.states = runtime.ledger.state_counts()
    return summary


def _list_runtime(config: CrawlConfig, threads: int) -> Runtime:
    runtime = Runtime.from_config(config)
    # A connection per request in flight: a pool smaller than the threads would
    # open (and throw away) a new connection for every request past its size.
    runtime.session = make_session(pool_size=max(16, 2 * threads))
    return runtime


def _download_pass(runtime: Runtime, source: Source, threads: int, shard: tuple[int, int] | None):
    # Items of earlier runs over the same list (other days) count too: every day
    # of the source. `threads` items worked on at once; as many threads again
    # for items sleeping through a Retry-After or a backoff, so those never
    # stall the rest of the list.
    workers = Workers(threads, wait_threads=threads, after_download=lambda item: verify_and_commit(runtime, item))
    # The commits in the workers share one flush of the store's folders per ledger
    # batch, made before the batch is recorded (pipeline/download.py `_apply`).
    with runtime.store.deferred_sync():
        return download_partition(runtime, source, None, workers=workers, ignore_backoff=True, shard=shard)

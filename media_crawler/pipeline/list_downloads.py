"""fetch-urls' downloads (pipeline/fetch_list.py): the passes over a list's rows once its feed is
recorded, in one process or several, with verify and commit pipelined per item in the
download worker (settle_in_place's `verify_and_commit`), then the ordinary verify and commit stages over
the list's rows. Its own module so that fetch_list imports it (the download engine,
Pillow, the ledger's SQLAlchemy) only after the feed's first request is out.
"""
from __future__ import annotations

from typing import Callable, ContextManager

from media_crawler.models import Source
from media_crawler.pipeline.download import Workers, download_partition
from media_crawler.pipeline.runtime import Runtime
from media_crawler.pipeline.settle_in_place import verify_and_commit
from media_crawler.pipeline.shard_processes import ShardProcesses
from media_crawler.pipeline.verify_commit import commit_partition, verify_partition
from media_crawler.store.ledger import CLAIM_LIMIT


# A list item still failing after the stage's in-step attempts (4, with
# backoff) gets one more pass when the pass got other items through:
# a transient fault that hit one item four times in a row is rare, but in a
# list of thousands it happens.
EXTRA_PASSES = 1

# Threads per download thread for items waiting out a retry delay (pipeline/download.py
# Workers.wait_threads). Under the bench's f503 faults (5% of requests answered 503
# with Retry-After: 1), a process with 4 download threads had up to 8 items asleep at
# once (issue 31), more with the downloads running ahead of verification: with one
# wait thread per download thread the sleepers took the downloads' threads and the
# list stalled behind them (in one run, 35 items ended in the half second with 15
# asleep, against ~100 a quarter second before). A sleeping thread costs its stack
# only; the server's load is bounded by the download turns, not by these threads.
WAIT_THREADS_PER_WORKER = 4


def download_list(runtime: Runtime, source: Source, workers: int, processes: int,
                  child_logging: Callable[[], ContextManager[None]] | None,
                  child_runtime: Callable[[], Runtime]) -> int:
    """Every recorded item of the list through download, verify and commit; the bytes downloaded.
    child_runtime: a forked shard process's own runtime (its own connections and ledger engine)."""
    threads = max(1, -(-workers // max(1, processes)))
    downloaded = 0
    if processes > 1:
        def download_shard(shard: tuple[int, int]) -> int:  # in a forked child: its own connections
            return _download_pass(child_runtime(), source, threads, shard).bytes

        with ShardProcesses(download_shard, processes, child_logging) as children:
            downloaded += _download_pass(runtime, source, threads, (0, processes)).bytes
        downloaded += children.bytes
    # Then passes over the whole list (all threads here): what a single process
    # downloads, the rows past one claim's limit, items a first pass left
    # waiting for a retry, and the rows of a shard process that died.
    retry_passes_left = EXTRA_PASSES
    while True:
        download = _download_pass(runtime, source, workers, None)
        downloaded += download.bytes
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
    return downloaded


def _download_pass(runtime: Runtime, source: Source, threads: int, shard: tuple[int, int] | None):
    # Items of earlier runs over the same list (other days) count too: every day
    # of the source. `threads` items downloaded at once (and as many verified);
    # WAIT_THREADS_PER_WORKER times as many threads for items sleeping through a
    # Retry-After or a backoff, so those never stall the rest of the list.
    workers = Workers(threads, wait_threads=WAIT_THREADS_PER_WORKER * threads,
                      after_download=lambda item: verify_and_commit(runtime, item))
    # The commits in the workers share one flush of the store's folders per ledger
    # batch, made before the batch is recorded (pipeline/download.py `_apply`).
    with runtime.store.deferred_sync():
        return download_partition(runtime, source, None, workers=workers, ignore_backoff=True, shard=shard)


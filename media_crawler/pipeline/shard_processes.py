"""fetch-urls across processes: each downloads its shard of the list's rows.

One Python process runs Python code on one core at a time (the GIL), so a list
of thousands of small files is bound by the interpreter long before the
network or the disk: per file, the HTTP exchange, the log lines and the ledger
bookkeeping are all Python. After the parent has recorded the feed, it forks
`count - 1` children and works on shard 0 itself; shard `i` is the rows whose
ledger id is `i` modulo `count` (store/leases.claim_downloads), so no two processes race for
a row. Each child connects to the ledger and opens its HTTP session anew
(store/database.py forgets the parent's engines after a fork) and has its own
log stream.

Nothing here needs the children to succeed: leases make the split safe. A
child that dies leaves rows leased to a dead pid, and the parent's next pass
over the whole list (fetch_list) takes them over.

Fork only (Linux): a spawned child would import everything again, which costs
more than it saves on a short list.
"""
from __future__ import annotations

import os
import sys
from typing import Callable, ContextManager

# multiprocessing is imported where processes start: fetch-urls asks FORK_AVAILABLE
# before its first request, which needs nothing of it (issue 31's start-up).
FORK_AVAILABLE = sys.platform.startswith("linux") and hasattr(os, "fork")

# (shard, count) -> bytes downloaded; runs in the child with the parent's memory.
ShardWork = Callable[[tuple[int, int]], int]


def default_process_count(workers: int) -> int:
    """One process per core, at most one per download thread, at most 4."""
    if not FORK_AVAILABLE:
        return 1
    return max(1, min(os.cpu_count() or 1, workers, 4))


class ShardProcesses:
    """`with ShardProcesses(work, count):` shards 1..count-1 run in children while the
    block runs shard 0; leaving the block waits for them. `.bytes` sums what they
    downloaded, `.failed` counts children that did not exit cleanly."""

    def __init__(self, work: ShardWork, count: int,
                 child_logging: Callable[[], ContextManager[None]] | None = None) -> None:
        """child_logging: set up (and at the end flush) the child's own log stream."""
        self.count = count
        self.bytes = 0
        self.failed = 0
        import multiprocessing

        self._work, self._child_logging = work, child_logging
        self._context = multiprocessing.get_context("fork")
        self._results = self._context.SimpleQueue()
        self._children: list = []

    def __enter__(self) -> "ShardProcesses":
        for index in range(1, self.count):
            child = self._context.Process(target=self._run_child, args=((index, self.count),),
                                          name=f"mc-shard-{index}", daemon=True)
            child.start()
            self._children.append(child)
        return self

    def __exit__(self, *_exc) -> None:
        for child in self._children:
            child.join()
            if child.exitcode != 0:
                self.failed += 1
        while not self._results.empty():
            self.bytes += self._results.get()

    def _run_child(self, shard: tuple[int, int]) -> None:
        if self._child_logging is None:
            self._results.put(self._work(shard))
            return
        with self._child_logging():
            self._results.put(self._work(shard))

"""The order a download stage hands its claimed items to the workers.

Two things make a stage slow at its end and in its middle:
- a big file started last: the stage then ends waiting on one download. So the
  largest files go first, and the small ones fill in around them.
- all workers on big files at once: a big file is mostly disk work (every
  byte is written and fsynced before the store link), a small one mostly
  per-item work for the interpreter (request, ledger row, log lines,
  verification, link). With every worker on a video the CPU idles while the
  disk is saturated, and afterwards the disk idles through the images. So
  while small files remain, at most half the workers hold a large one.
"""
from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from media_crawler.store.ledger import Task

# Threads one worker downloads with. Small on purpose: N workers give 4N in all,
# and the per-platform rate budget, not the thread count, decides the request rate.
DOWNLOAD_THREADS_PER_WORKER = 4

# From this size on, a file counts as large (disk-bound). The feed's announced
# size decides; a file of unknown size counts as small.
LARGE_FILE_BYTES = 8 * 1024 * 1024


def is_large(task: Task) -> bool:
    return (task.expected_size or 0) >= LARGE_FILE_BYTES


class SizeAwareOrder:
    """Largest first, with at most `workers // 2` large files handed out and
    unfinished while small files remain; once they are gone, the rest freely.

    Iterate it to hand tasks out (the pool pulls one whenever a worker frees
    up); call `finished(task)` from the worker when a task ends.
    """

    def __init__(self, tasks: list[Task], workers: int) -> None:
        ordered = sorted(tasks, key=lambda task: -(task.expected_size or 0))
        self._large = deque(task for task in ordered if is_large(task))
        self._small = deque(task for task in ordered if not is_large(task))
        self._large_cap = max(1, workers // 2)
        self._large_out = 0
        self._lock = threading.Lock()

    def __iter__(self) -> Iterator[Task]:
        while True:
            with self._lock:
                if not self._large and not self._small:
                    return
                take_large = bool(self._large) and (self._large_out < self._large_cap or not self._small)
                if take_large:
                    self._large_out += 1
                    task = self._large.popleft()
                else:
                    task = self._small.popleft()
            yield task

    def finished(self, task: Task) -> None:
        if is_large(task):
            with self._lock:
                self._large_out -= 1

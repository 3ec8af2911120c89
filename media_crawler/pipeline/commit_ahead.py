"""The commit stage's puts, a few at a time on a store that copies its bytes over a network.

A put into an object store is an upload: a round trip or more, most of it waiting. The
stage still settles its items one by one, in order (verify_commit._commit: the ledger
moves, the report, the stop on a full or failing store); CommitsAhead only starts the
puts of the next few items in a small pool while it waits for the current one's, so the
uploads overlap. A store says how many puts may run at once (`concurrent_puts`; a folder
store has none: its put is a link, serial as before).

What stays as it was:
- crash convergence: each put is the same `commit_staged` (put-if-absent; the staged file
  is removed only after the object is confirmed). A put started ahead for an item the
  stage then does not settle (it stopped on a full store, the process was killed) has
  either left its staged file or stored the blob: the next run commits it either way.
- throttling: the S3 client already backs off on SlowDown/429 and server errors; an item
  that still fails with a class that slows the platform or says the server is unwell
  turns the look-ahead off for the rest of the batch (one put at a time).
- the disk guard: an upload reads a staged file and writes nothing local.
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

from media_crawler.pipeline.runtime import Runtime
from media_crawler.pipeline.settle import Settled, commit_staged
from media_crawler.store.ledger import Task


class CommitsAhead:
    def __init__(self, runtime: Runtime, tasks: list[Task]) -> None:
        self.runtime = runtime
        self.tasks = tasks
        self.width = max(1, int(getattr(runtime.store, "concurrent_puts", 1)))
        self._position = {task.id: n for n, task in enumerate(tasks)}
        self._started: dict[int, Future] = {}
        self._next = 0  # the first task not started ahead yet
        self._pool: ThreadPoolExecutor | None = None

    def __enter__(self) -> "CommitsAhead":
        if self.width > 1 and len(self.tasks) > 1:
            self._pool = ThreadPoolExecutor(self.width, thread_name_prefix="commit-put")
        return self

    def __exit__(self, *exc_info) -> None:
        if self._pool is not None:
            # Puts not begun are dropped (their items stay verified); puts under way end
            # first, so no upload outlives the stage.
            self._pool.shutdown(wait=True, cancel_futures=True)

    def _put(self, task: Task) -> Settled:
        return commit_staged(self.runtime, task, sha256=task.sha256, size=task.size, attempts=task.attempts)

    def stored_ahead(self, task: Task) -> bool:
        """Did a put started ahead store `task`'s blob (waiting for it if under way)? Its
        staged file is gone then, and the stage need not ask the store whether the blob is."""
        future = self._started.get(task.id)
        return future is not None and future.result().error is None

    def settle(self, task: Task) -> Settled:
        """The put of `task` (started ahead, or now), having started the next ones."""
        if self._pool is None:
            return self._put(task)
        position = self._position.get(task.id, self._next)
        while self._next < len(self.tasks) and self._next < position + self.width:
            ahead = self.tasks[self._next]
            self._started[ahead.id] = self._pool.submit(self._put, ahead)
            self._next += 1
        future = self._started.pop(task.id, None)
        settled = future.result() if future is not None else self._put(task)
        if settled.error is not None and (settled.error.policy.slows_platform or settled.error.policy.outage):
            self.width = 1  # the store is pushing back: no more puts ahead in this batch
        return settled

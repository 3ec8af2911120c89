"""A bounded worker pool: N threads over an iterable, with a cap on work in flight.

`ThreadPoolExecutor.map` submits the whole iterable up front, so a feed of a
million URLs becomes a million queued futures. Here items are pulled from the
iterable only as results drain, so memory and open files stay bounded by
`max_in_flight` however long the input or slow the platform.
"""
from __future__ import annotations

import queue
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Generic, Iterable, Iterator, TypeVar

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")
_END = object()  # sentinel: the input iterable is exhausted


@dataclass(frozen=True)
class Outcome(Generic[ItemT, ResultT]):
    """One item's result, or the exception its function raised (one bad item does not stop the rest)."""

    item: ItemT
    result: ResultT | None = None
    error: Exception | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def run_bounded(
    function: Callable[[ItemT], ResultT],
    items: Iterable[ItemT],
    *,
    workers: int,
    max_in_flight: int | None = None,
    thread_name_prefix: str = "mc-worker",
) -> Iterator[Outcome[ItemT, ResultT]]:
    """Yield an Outcome per item as each completes (not in input order).

    max_in_flight: items submitted but not yet yielded; default twice the
    workers, so a worker finishing never waits for the consumer to feed it.
    Closing the iterator early cancels the items not yet started.
    """
    if workers < 1:
        raise ValueError("workers must be at least 1")
    limit = max(max_in_flight or 2 * workers, workers)
    source = iter(items)
    # Finished futures arrive on a queue (a done-callback each) rather than
    # through concurrent.futures.wait(), which registers a waiter on every
    # pending future per call: at thousands of small items a second that
    # bookkeeping, not the work, kept the consumer busy.
    finished: queue.SimpleQueue[tuple[Future, ItemT]] = queue.SimpleQueue()
    in_flight = 0
    executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=thread_name_prefix)
    try:
        exhausted = False
        while True:
            while not exhausted and in_flight < limit:
                item = next(source, _END)
                if item is _END:
                    exhausted = True
                    break
                future = executor.submit(function, item)
                future.add_done_callback(lambda done, item=item: finished.put((done, item)))
                in_flight += 1
            if not in_flight:
                return
            future, item = finished.get()
            in_flight -= 1
            error = future.exception()
            yield Outcome(item, None, error) if error is not None else Outcome(item, future.result())
    finally:
        executor.shutdown(wait=True, cancel_futures=True)

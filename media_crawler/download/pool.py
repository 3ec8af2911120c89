"""A bounded worker pool: N threads over an iterable, with a cap on work in flight.

`ThreadPoolExecutor.map` submits the whole iterable up front, so a feed of a
million URLs becomes a million queued futures. Here items are pulled from the
iterable only as results drain, so memory and open files stay bounded by
`max_in_flight` however long the input or slow the platform.

An optional second stage (`then`) runs on threads of its own, so the first
can run ahead of it: fetch-urls downloads on the first and verifies (the CPU's
work: a full decode of every image) on the second, so a download that must
wait out a server's Retry-After is asked for, and waited out, while earlier
items are still being decoded, not after them (pipeline/download.py).
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
    then: Callable[[ResultT], ResultT] | None = None,
    then_workers: int | None = None,
) -> Iterator[Outcome[ItemT, ResultT]]:
    """Yield an Outcome per item as each completes (not in input order).

    max_in_flight: items submitted to `function` but not yet through it; default
    twice the workers, so a worker finishing never waits for the consumer to feed it.
    then: a second stage, on threads of its own (`then_workers`, default
    `workers`), run on each successful result of `function` before its Outcome
    is yielded. Items waiting for it do not count against max_in_flight: the
    first stage runs ahead of the second by as much as the input allows (the
    caller's input bounds it). An error in either stage is the item's Outcome.
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
    # (future, item, stage): the future that ended the item in `stage` (1 or 2), or
    # (None, item, 0): the item left the first stage for the second.
    finished: queue.SimpleQueue[tuple[Future | None, ItemT, int]] = queue.SimpleQueue()
    executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=thread_name_prefix)
    second = None if then is None else ThreadPoolExecutor(max_workers=max(1, then_workers or workers),
                                                          thread_name_prefix=f"{thread_name_prefix}-then")

    def first_done(done: Future, item: ItemT) -> None:
        if second is None or done.cancelled() or done.exception() is not None:
            finished.put((done, item, 1))
            return
        try:
            follow = second.submit(then, done.result())
        except RuntimeError:  # the iterator is being closed: the second stage is shut down
            return
        finished.put((None, item, 0))
        follow.add_done_callback(lambda ended: finished.put((ended, item, 2)))

    in_first = in_second = 0
    try:
        exhausted = False
        while True:
            while not exhausted and in_first < limit:
                item = next(source, _END)
                if item is _END:
                    exhausted = True
                    break
                future = executor.submit(function, item)
                future.add_done_callback(lambda done, item=item: first_done(done, item))
                in_first += 1
            if not in_first and not in_second:
                return
            future, item, stage = finished.get()
            if stage == 0:
                in_first, in_second = in_first - 1, in_second + 1
                continue
            if stage == 1:
                in_first -= 1
            else:
                in_second -= 1
            error = future.exception()
            yield Outcome(item, None, error) if error is not None else Outcome(item, future.result())
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
        if second is not None:
            second.shutdown(wait=True, cancel_futures=True)

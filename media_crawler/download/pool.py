"""A bounded worker pool: N threads over an iterable, with a cap on work in flight.

`ThreadPoolExecutor.map` submits the whole iterable up front, so a feed of a
million URLs becomes a million queued futures. Here items are pulled from the
iterable only as results drain, so memory and open files stay bounded by
`max_in_flight` however long the input or slow the platform.

The threads are plain ones on two C queues (items in, outcomes out), not a
ThreadPoolExecutor: its Future per item (a Condition, a lock taken on submit, on
the result, on each read of it, and an idle-thread semaphore on every submit)
was Python work per item that at thousands of small files a second showed in
the profile, for nothing a pool of identical workers needs.
"""
from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from typing import Callable, Generic, Iterable, Iterator, TypeVar

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")
_END = object()  # sentinel: the input iterable is exhausted / a worker is to stop


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
    Closing the iterator early cancels the items not yet started and waits for
    the running ones, as ThreadPoolExecutor.shutdown(cancel_futures=True) did.
    """
    if workers < 1:
        raise ValueError("workers must be at least 1")
    limit = max(max_in_flight or 2 * workers, workers)
    source = iter(items)
    # Both queues block in C with the GIL released (queue.SimpleQueue).
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    finished: queue.SimpleQueue[Outcome[ItemT, ResultT]] = queue.SimpleQueue()
    cancelled: list[bool] = []  # non-empty once the consumer has stopped: skip what is not started

    def serve() -> None:
        while True:
            item = inbox.get()
            if item is _END:
                return
            if cancelled:
                continue
            try:
                result = function(item)
            except BaseException as error:  # noqa: BLE001 - as a Future keeps it: the consumer decides
                finished.put(Outcome(item, None, error))
            else:
                finished.put(Outcome(item, result))

    threads: list[threading.Thread] = []
    in_flight = 0
    try:
        exhausted = False
        while True:
            while not exhausted and in_flight < limit:
                item = next(source, _END)
                if item is _END:
                    exhausted = True
                    break
                if len(threads) < workers and len(threads) <= in_flight:  # one more thread while all are busy
                    thread = threading.Thread(target=serve, name=f"{thread_name_prefix}_{len(threads)}")
                    thread.start()
                    threads.append(thread)
                inbox.put(item)
                in_flight += 1
            if not in_flight:
                return
            outcome = finished.get()
            in_flight -= 1
            yield outcome
    finally:
        cancelled.append(True)
        for _ in threads:
            inbox.put(_END)
        for thread in threads:
            thread.join()

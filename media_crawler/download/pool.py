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

An optional second stage (`then`) runs on threads of its own, so the first
can run ahead of it: fetch-urls downloads on the first and verifies (the CPU's
work: a full decode of every image) on the second, so a download that must
wait out a server's Retry-After is asked for, and waited out, while earlier
items are still being decoded, not after them (pipeline/download.py).
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
    then: Callable[[ResultT], ResultT] | None = None,
    then_workers: int | None = None,
    on_close: Callable[[], None] | None = None,
    thread_name_prefix: str = "mc-worker",
) -> Iterator[Outcome[ItemT, ResultT]]:
    """Yield an Outcome per item as each completes (not in input order).

    max_in_flight: items given to `function` but not yet through it; default
    twice the workers, so a worker finishing never waits for the consumer to feed it.
    then: a second stage, on threads of its own (`then_workers`, default
    `workers`), run on each successful result of `function` before its Outcome
    is yielded. Items waiting for it do not count against max_in_flight: the
    first stage runs ahead of the second by as much as the input allows (the
    caller's input bounds it). An error in either stage is the item's Outcome.
    Closing the iterator early skips the items not yet started in either stage
    and waits for the running ones, as ThreadPoolExecutor.shutdown(cancel_futures=True) did.
    on_close: called when the iterator stops with items still in it (closed early, or
    the consumer's exception, KeyboardInterrupt included), before the running ones
    are waited for. A first-stage call may be waiting for something only a second
    stage gives back (pipeline/download.py `_RunAhead`'s credits); the second stage
    skips what it has not started, so without this wake-up the wait, and the join
    after it, would never end.
    """
    if workers < 1:
        raise ValueError("workers must be at least 1")
    limit = max(max_in_flight or 2 * workers, workers)
    then_limit = max(1, then_workers or workers)
    source = iter(items)
    # All queues block in C with the GIL released (queue.SimpleQueue).
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    handoff: queue.SimpleQueue = queue.SimpleQueue()  # (item, first result) for the second stage
    # (stage, outcome): stage 1 or 2 ended the item with this outcome; stage 0 (no outcome):
    # the item left the first stage for the second.
    finished: queue.SimpleQueue[tuple[int, Outcome[ItemT, ResultT] | None]] = queue.SimpleQueue()
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
                finished.put((1, Outcome(item, None, error)))
                continue
            if then is None:
                finished.put((1, Outcome(item, result)))
            else:
                finished.put((0, None))  # before the handoff: its stage-2 message cannot overtake it
                handoff.put((item, result))

    def serve_then() -> None:
        while True:
            entry = handoff.get()
            if entry is _END:
                return
            if cancelled:
                continue
            item, first = entry
            try:
                finished.put((2, Outcome(item, then(first))))
            except BaseException as error:  # noqa: BLE001
                finished.put((2, Outcome(item, None, error)))

    threads: list[threading.Thread] = []
    then_threads: list[threading.Thread] = []
    in_first = in_second = 0
    try:
        exhausted = False
        while True:
            while not exhausted and in_first < limit:
                item = next(source, _END)
                if item is _END:
                    exhausted = True
                    break
                if len(threads) < workers and len(threads) <= in_first:  # one more thread while all are busy
                    thread = threading.Thread(target=serve, name=f"{thread_name_prefix}_{len(threads)}")
                    thread.start()
                    threads.append(thread)
                inbox.put(item)
                in_first += 1
            if not in_first and not in_second:
                return
            stage, outcome = finished.get()
            if stage == 0:
                in_first, in_second = in_first - 1, in_second + 1
                if len(then_threads) < then_limit and len(then_threads) < in_second:
                    thread = threading.Thread(target=serve_then, name=f"{thread_name_prefix}-then_{len(then_threads)}")
                    thread.start()
                    then_threads.append(thread)
                continue
            if stage == 1:
                in_first -= 1
            else:
                in_second -= 1
            yield outcome
    finally:
        cancelled.append(True)
        if on_close is not None and (in_first or in_second):
            on_close()
        for _ in threads:
            inbox.put(_END)
        for _ in then_threads:
            handoff.put(_END)
        for thread in threads + then_threads:
            thread.join()

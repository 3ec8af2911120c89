"""A bounded worker pool: N threads over an iterable, with a cap on work in flight.

`ThreadPoolExecutor.map` submits the whole iterable up front, so a feed of a
million URLs becomes a million queued futures. Here items are pulled from the
iterable only as results drain, so memory and open files stay bounded by
`max_in_flight` however long the input or slow the platform.

The threads are plain ones, not a ThreadPoolExecutor: its Future per item (a
Condition, a lock taken on submit, on the result, on each read of it, and an
idle-thread semaphore on every submit) was Python work per item that at
thousands of small files a second showed in the profile, for nothing a pool of
identical workers needs. Each worker pulls its next item from the iterable itself
(under a lock) and puts the item's outcome on a C queue (queue.SimpleQueue, which
blocks with the GIL released) that the caller reads: one hand-off between threads
per item. (The caller used to feed each item to the workers through a queue, and
to be told of each item leaving the first stage: with fetch-urls' two stages that
was three wake-ups of a parked thread per item, each a futex call and a context
switch around the interpreter lock.)

An optional second stage (`then`) runs on threads of its own, so the first
can run ahead of it: fetch-urls downloads on the first and verifies (the CPU's
work: a full decode of every image) on the second, so a download that must
wait out a server's Retry-After is asked for, and waited out, while earlier
items are still being decoded, not after them (pipeline/download.py).
With a second stage its outcomes reach the caller in batches: they wait in a
deque, and the caller's thread is woken when WAKE_EVERY have gathered (or
DELIVER_WITHIN_S has passed), to take all that are there. Woken per item (a put
to the queue it waited on), fetch-urls' main thread woke for about one item in
four (~600 wakes a process on 2,500 files, now ~60), each wake a futex call, a
context switch and a GIL transfer, and it took the GIL for its record of each
item (a log line, a ledger change) between the settling threads' work: in
batches the 5,000-file set made ~13 % fewer context switches and futex calls and
took ~1.5 % less CPU (50 interleaved runs). (Recording each outcome on the thread
that settled it instead, under a lock, cut the context switches by a quarter but
took no less CPU: the recording's user time grew as the scheduler's shrank.)

The first stage has `workers` threads; beyond them, a spare thread (up to
`Naps.spares`) is started only when an item sleeps through a retry delay
(`Naps.sleep`) and the items are not yet all handed out, so the others keep `workers`
threads going. fetch-urls allowed 16 such sleepers per process and started them
all on its first items: every token a stage handed on then woke a parked thread.
Every worker runs in a copy of the caller's context (its context variables: the
log lines' correlation ids), as asyncio.to_thread does, so no item has to set them.
"""
from __future__ import annotations

import collections
import contextvars
import queue
import threading
import time
from typing import Callable, Generic, Iterable, Iterator, TypeVar

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")
_END = object()  # sentinel: the input iterable is exhausted / a worker is to stop

# What the caller's queue (`finished`) carries: (kind, value).
_DONE = 0  # value: an item's Outcome
_NAP = 1  # value: +1 a first-stage worker fell asleep (Naps), -1 it woke up
_FIRST_EXIT = 2  # a first-stage worker found the input exhausted (or the pool closed) and ended
_THEN_EXIT = 3  # a second-stage worker ended
_RAISED = 4  # value: what the input iterable raised
_READY = 5  # with a second stage: WAKE_EVERY outcomes (or more) wait in `ready`

# With a second stage, the caller is woken when this many outcomes wait for it...
WAKE_EVERY = 32
# ...or, as they trickle in, once this long has passed (the caller waits no longer).
DELIVER_WITHIN_S = 0.05
# The workers' names, as a stack dump or py-spy shows them: mc-worker_N, mc-worker-then_N.
THREAD_NAME = "mc-worker"


class Outcome(Generic[ItemT, ResultT]):
    """One item's result, or the exception its function raised (one bad item does not stop the rest)."""

    __slots__ = ("item", "result", "error")

    def __init__(self, item: ItemT, result: ResultT | None = None, error: BaseException | None = None) -> None:
        self.item, self.result, self.error = item, result, error

    @property
    def ok(self) -> bool:
        return self.error is None

    def __repr__(self) -> str:
        return f"Outcome(item={self.item!r}, result={self.result!r}, error={self.error!r})"


class Naps:
    """How a pool's worker sleeps through a delay (a retry's backoff or Retry-After) and
    says so: while it sleeps, its pool (run_bounded given these naps) may run one of
    `spares` threads beyond its `workers` so that `workers` items still go on. Outside
    a pool, `sleep` is time.sleep."""

    def __init__(self, spares: int) -> None:
        self.spares = max(0, spares)
        self._tell: Callable[[tuple[int, object]], None] | None = None

    def sleep(self, seconds: float) -> None:
        tell = self._tell
        if tell is None:
            time.sleep(seconds)
            return
        tell((_NAP, 1))
        try:
            time.sleep(seconds)
        finally:
            tell((_NAP, -1))


def run_bounded(
    function: Callable[[ItemT], ResultT],
    items: Iterable[ItemT],
    *,
    workers: int,
    naps: Naps | None = None,
    max_in_flight: int | None = None,
    then: Callable[[ResultT], ResultT] | None = None,
    then_workers: int | None = None,
    closing: Callable[[], None] | None = None,
) -> Iterator[Outcome[ItemT, ResultT]]:
    """Yield an Outcome per item as each completes (not in input order).

    naps: how items sleep through a delay (`naps.sleep`): while one does, a spare thread
    (at most `naps.spares`) is started if input remains (so at most as many as items
    ever slept at once), and the sleeping item does not count against max_in_flight.
    max_in_flight: items pulled from `items` and not yet yielded; default twice the
    workers, so a worker finishing never waits for the consumer. With `then`, the
    first stage holds one item per thread (what it caps), and items waiting for the
    second stage do not count: the first stage runs ahead of the second by as much
    as the input allows (the caller's input bounds it).
    then: a second stage, on threads of its own (`then_workers`, default
    `workers`), run on each successful result of `function` before its Outcome
    is yielded (in batches: WAKE_EVERY, or what came within DELIVER_WITHIN_S).
    An error in either stage is the item's Outcome; an error of the input
    iterable itself is raised here.
    Closing the iterator early skips the items not yet started in either stage
    and waits for the running ones, as ThreadPoolExecutor.shutdown(cancel_futures=True) did.
    closing: called first when the pool closes, before its threads are joined: it ends
    any wait of the caller's own that only a skipped item would have ended. The
    caller's own cleanup comes too late when the pool closes on an exception raised
    inside it (Ctrl-C while it waits for an outcome): the join comes first.
    """
    if workers < 1:
        raise ValueError("workers must be at least 1")
    most_threads = workers + (naps.spares if naps is not None else 0)
    source = iter(items)
    source_lock = threading.Lock()  # a generator refuses two threads at once
    finished: queue.SimpleQueue[tuple[int, object]] = queue.SimpleQueue()
    handoff: queue.SimpleQueue = queue.SimpleQueue()  # (item, first result) for the second stage
    # Without a second stage, a token per item that may be pulled and not yet yielded
    # (the consumer hands it back as it yields). With one, each first-stage thread holds
    # one item at most, which is the cap.
    slots: queue.SimpleQueue[None] | None = None
    if then is None:
        slots = queue.SimpleQueue()
        for _ in range(max(max_in_flight or 2 * workers, workers)):
            slots.put(None)
    # With a second stage: its outcomes, for the caller to take WAKE_EVERY at a time (or as
    # DELIVER_WITHIN_S passes); `woken` is non-empty while a wake-up is on its way.
    ready: collections.deque[Outcome[ItemT, ResultT]] = collections.deque()
    woken: list[bool] = []
    stopped: list[bool] = []  # non-empty once the input is exhausted or the consumer has stopped
    cancelled: list[bool] = []  # non-empty once the consumer has stopped: skip what is not started

    def pull() -> object:
        if slots is not None:
            slots.get()
        with source_lock:
            if stopped or cancelled:
                return _END
            try:
                item = next(source, _END)
            except BaseException as error:  # noqa: BLE001 - the consumer raises it
                finished.put((_RAISED, error))
                item = _END
            if item is _END:
                stopped.append(True)
            return item

    def deliver(outcome: Outcome[ItemT, ResultT]) -> None:
        if then is None:
            finished.put((_DONE, outcome))
            return
        ready.append(outcome)
        if len(ready) >= WAKE_EVERY and not woken:
            woken.append(True)
            finished.put((_READY, None))

    def serve() -> None:
        try:
            while True:
                item = pull()
                if item is _END:
                    return
                try:
                    result = function(item)  # type: ignore[arg-type]
                except BaseException as error:  # noqa: BLE001 - as a Future keeps it: the consumer decides
                    deliver(Outcome(item, None, error))
                    continue
                if then is None:
                    finished.put((_DONE, Outcome(item, result)))
                else:
                    handoff.put((item, result))
        finally:
            finished.put((_FIRST_EXIT, None))

    def serve_then() -> None:
        try:
            while True:
                entry = handoff.get()
                if entry is _END:
                    return
                if cancelled:
                    continue
                item, first = entry
                try:
                    outcome = Outcome(item, then(first))
                except BaseException as error:  # noqa: BLE001
                    outcome = Outcome(item, None, error)
                deliver(outcome)
        finally:
            finished.put((_THEN_EXIT, None))

    def start(target: Callable[[], None], name: str) -> threading.Thread:
        # In a copy of the caller's context: its context variables hold in the worker too.
        thread = threading.Thread(target=contextvars.copy_context().run, args=(target,), name=name)
        thread.start()
        return thread

    threads: list[threading.Thread] = []
    then_threads: list[threading.Thread] = []
    first_running = then_running = asleep = owed = 0
    raised: BaseException | None = None
    if naps is not None:
        naps._tell = finished.put
    try:
        for _ in range(workers):
            threads.append(start(serve, f"{THREAD_NAME}_{len(threads)}"))
        first_running = len(threads)
        if then is not None:
            for _ in range(max(1, then_workers or workers)):
                then_threads.append(start(serve_then, f"{THREAD_NAME}-then_{len(then_threads)}"))
            then_running = len(then_threads)
        wait = DELIVER_WITHIN_S if then is not None else None
        while first_running or then_running:
            try:
                kind, value = finished.get(timeout=wait)
            except queue.Empty:
                kind, value = _READY, None
            if kind == _READY:
                woken.clear()  # (before taking them: an outcome that comes meanwhile wakes us again)
            elif kind == _DONE:
                if slots is not None:
                    if owed:
                        owed -= 1  # the token a sleeper lent is not handed back
                    else:
                        slots.put(None)
                yield value  # type: ignore[misc]
            elif kind == _NAP:
                asleep += value  # type: ignore[operator]
                if value > 0:  # type: ignore[operator]
                    if slots is not None:
                        slots.put(None)  # the sleeper's item does not count against the cap...
                    if not stopped and len(threads) < min(most_threads, workers + asleep):
                        threads.append(start(serve, f"{THREAD_NAME}_{len(threads)}"))
                        first_running += 1
                elif slots is not None:
                    owed += 1  # ...until it wakes: the next token handed back is not
            elif kind == _FIRST_EXIT:
                first_running -= 1
                if not first_running:  # every item is through the first stage
                    for _ in then_threads:
                        handoff.put(_END)
            elif kind == _THEN_EXIT:
                then_running -= 1
            else:  # _RAISED
                raised = value  # type: ignore[assignment]
            while ready:  # every outcome there, whatever woke us (a thread's exit follows its outcomes)
                yield ready.popleft()
        if raised is not None:
            raise raised
    finally:
        if naps is not None:
            naps._tell = None
        cancelled.append(True)
        if closing is not None:
            closing()
        if slots is not None:
            for _ in threads:
                slots.put(None)  # a worker waiting for a token sees the pool closed
        for _ in then_threads:
            handoff.put(_END)
        for thread in threads + then_threads:
            thread.join()

"""run_bounded: every item processed, in-flight work capped, failures returned as outcomes, early close."""
from __future__ import annotations

import threading
import time

import pytest

from media_crawler.download.pool import run_bounded


def test_every_item_is_processed_once():
    outcomes = list(run_bounded(lambda n: n * n, range(100), workers=4))
    assert sorted(o.result for o in outcomes) == [n * n for n in range(100)]
    assert all(o.ok for o in outcomes)


def test_the_workers_run_items_at_once():
    """All four workers hold an item at the same time: each waits at a barrier the other
    three must reach (a pool running items one by one breaks it and fails here)."""
    together = threading.Barrier(4, timeout=10)  # the timeout only ends a failing run

    def meet(n):
        together.wait()
        return n

    outcomes = list(run_bounded(meet, range(8), workers=4))
    assert [o.error for o in outcomes if not o.ok] == []
    assert sorted(o.result for o in outcomes) == list(range(8))


def test_items_are_pulled_only_as_results_drain():
    pulled = 0

    def feed():
        nonlocal pulled
        for n in range(200):
            pulled += 1
            yield n

    yielded, worst = 0, 0
    for _ in run_bounded(lambda n: n, feed(), workers=3, max_in_flight=5):
        yielded += 1
        worst = max(worst, pulled - yielded)
    assert yielded == 200 and worst <= 5


def test_a_failing_item_becomes_an_outcome_and_the_rest_continue():
    def fragile(n):
        if n == 3:
            raise ValueError("bad item")
        return n

    outcomes = {o.item: o for o in run_bounded(fragile, range(6), workers=2)}
    assert isinstance(outcomes[3].error, ValueError) and not outcomes[3].ok
    assert [outcomes[n].result for n in (0, 1, 2, 4, 5)] == [0, 1, 2, 4, 5]


def test_closing_early_cancels_work_not_started():
    started = []
    gate = threading.Event()

    def slow(n):
        started.append(n)
        gate.wait(2)
        return n

    results = run_bounded(slow, range(1000), workers=2, max_in_flight=4)
    gate.set()
    next(results)
    results.close()
    assert len(started) < 20


def test_workers_must_be_positive():
    with pytest.raises(ValueError):
        list(run_bounded(lambda n: n, [1], workers=0))


def test_the_first_stage_runs_ahead_of_a_second_stage_that_is_still_busy():
    """With `then`, every item passes the first stage while the second still holds the
    first item (a pool running both stages in one thread would stop at the first item:
    the gate's timeout only ends a failing run)."""
    first_done: list[int] = []
    all_first = threading.Event()

    def first(n):
        first_done.append(n)
        if len(first_done) == 10:
            all_first.set()
        return n

    def second(n):
        if n == 0:
            assert all_first.wait(10), f"the first stage stopped at {first_done}"
        return n * 10

    outcomes = list(run_bounded(first, range(10), workers=1, then=second, then_workers=1, max_in_flight=1))
    assert [o.error for o in outcomes if not o.ok] == []
    assert sorted(o.result for o in outcomes) == [n * 10 for n in range(10)]


def test_an_error_in_either_stage_is_the_items_outcome_and_a_failed_first_stage_skips_the_second():
    seconds: list[int] = []

    def first(n):
        if n == 1:
            raise ValueError("download failed")
        return n

    def second(n):
        seconds.append(n)
        if n == 2:
            raise KeyError("verify failed")
        return n

    outcomes = {o.item: o for o in run_bounded(first, range(4), workers=2, then=second)}
    assert isinstance(outcomes[1].error, ValueError) and isinstance(outcomes[2].error, KeyError)
    assert [outcomes[n].result for n in (0, 3)] == [0, 3]
    assert sorted(seconds) == [0, 2, 3]


def test_a_spare_thread_starts_only_while_an_item_sleeps():
    """Spare threads (`Naps.spares`) are started for items asleep in `naps.sleep` only: a
    run without a nap keeps to `workers` threads, and one nap lets the other items go on meanwhile."""
    from media_crawler.download.pool import Naps

    naps = Naps(spares=4)
    names: set[str] = set()
    woke = threading.Event()

    def work(n):
        names.add(threading.current_thread().name)
        if n == 0:
            naps.sleep(0.3)  # the other items pass through another thread meanwhile
            woke.set()
        return n

    outcomes = list(run_bounded(work, range(50), workers=1, naps=naps))
    assert sorted(o.result for o in outcomes) == list(range(50)) and woke.is_set()
    assert len(names) == 2  # the worker, and one spare for the sleeper

    names.clear()
    list(run_bounded(lambda n: names.add(threading.current_thread().name), range(50), workers=2, naps=Naps(8)))
    assert len(names) <= 2


def test_the_workers_see_the_callers_context_variables():
    import contextvars

    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")
    marker.set("the caller's")
    outcomes = list(run_bounded(lambda n: marker.get(), range(4), workers=2, then=lambda seen: (seen, marker.get())))
    assert {o.result for o in outcomes} == {("the caller's", "the caller's")}


def test_a_second_stages_outcomes_come_in_batches_and_one_alone_comes_too():
    """With `then`, the outcomes reach the caller WAKE_EVERY at a time (its thread is not
    woken per item), each exactly once; and one that comes alone reaches it within
    DELIVER_WITHIN_S, not when enough have gathered."""
    from media_crawler.download import pool

    outcomes = list(run_bounded(lambda n: n, range(10 * pool.WAKE_EVERY + 3), workers=4, then=lambda n: -n))
    assert sorted(o.result for o in outcomes) == [-n for n in reversed(range(10 * pool.WAKE_EVERY + 3))]

    seen: list[int] = []

    def after_the_previous_is_seen(n):  # so each outcome comes alone
        # Not a timing claim: a lone outcome held back for a batch would never come (this
        # item waits for it), and the guard only turns that deadlock into a failure.
        deadlock_guard = time.monotonic() + 60
        while len(seen) < n:
            assert time.monotonic() < deadlock_guard, f"item {n - 1} not delivered alone"
            time.sleep(0.005)
        return n

    for outcome in run_bounded(after_the_previous_is_seen, range(5), workers=1, then=lambda n: n, then_workers=1):
        assert outcome.ok, outcome.error
        seen.append(outcome.result)
    assert seen == [0, 1, 2, 3, 4]


def test_an_exception_inside_the_pool_calls_closing_before_the_join():
    """Ctrl-C while the pool waits for an outcome is raised inside it: its own finally then
    joins the threads before the caller's cleanup runs. A download waiting for what only a
    skipped second stage would give back (fetch-urls' run-ahead credits) must be let go by
    `closing` first, or the join waits for ever."""
    credits = threading.Semaphore(1)  # given back by the second stage only, as the run-ahead's
    closed = threading.Event()

    def first(item: int) -> int:
        credits.acquire()
        if closed.is_set():
            credits.release()  # passed on: every download still waiting stops too
            raise RuntimeError("the step is ending")
        return item

    def then(item: int) -> int:
        time.sleep(0.05)
        credits.release()
        return item

    def close() -> None:
        closed.set()
        credits.release()

    ended = threading.Event()

    def consume() -> None:
        outcomes = run_bounded(first, range(100), workers=3, then=then, closing=close)
        next(outcomes)
        with pytest.raises(KeyboardInterrupt):
            outcomes.throw(KeyboardInterrupt)  # raised where the pool waits, as a Ctrl-C is
        ended.set()

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    consumer.join(timeout=30)
    assert ended.is_set(), "the pool's join waited for a download that only a skipped settle would release"

"""run_bounded: every item processed, in-flight work capped, failures returned as outcomes, early close."""
from __future__ import annotations

import threading

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

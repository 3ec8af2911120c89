"""Rate budgets on a fake clock: the shared SQLite-backed token bucket, penalties and recovery, batching, concurrency caps."""
from __future__ import annotations

import pytest
from sqlalchemy import create_engine, event

from media_crawler.download.ratebudget import Bucket, InMemoryRateBudget, SharedRateBudget
from media_crawler.store.schema import rate_budget
from media_crawler_tests.download.support import FakeClock

RATE, BURST = 5.0, 4.0


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def db_url(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    engine = create_engine(url)
    rate_budget.create(engine)  # the ledger's migrations own this in production
    engine.dispose()
    return url


def shared(db_url, clock, **options):
    return SharedRateBudget(
        create_engine(db_url), {"bilibili": (RATE, BURST)}, clock=clock.time, sleep=clock.sleep, **options
    )


def test_two_processes_share_one_bucket(db_url, clock):
    first, second = shared(db_url, clock), shared(db_url, clock)
    start, acquisitions = clock.now, 24

    for index in range(acquisitions):
        (first if index % 2 else second).acquire("bilibili")

    elapsed = clock.now - start
    expected = (acquisitions - BURST) / RATE  # the burst is free, the rest comes at RATE
    assert expected - 1 / RATE <= elapsed <= expected + 1 / RATE


def test_a_drained_bucket_makes_the_other_process_wait(db_url, clock):
    first, second = shared(db_url, clock), shared(db_url, clock)
    for _ in range(int(BURST)):
        first.acquire("bilibili")
    assert clock.sleeps == []

    second.acquire("bilibili")

    assert clock.sleeps and sum(clock.sleeps) == pytest.approx(1 / RATE)


def test_a_penalty_slows_every_process_and_wears_off(db_url, clock):
    first, second = shared(db_url, clock), shared(db_url, clock)

    first.penalize("bilibili", factor=0.5, seconds=60)

    assert second.current_rate("bilibili") == pytest.approx(RATE / 2)
    second.acquire("bilibili")  # the penalty also spent the saved-up burst
    assert sum(clock.sleeps) == pytest.approx(2 / RATE)
    clock.sleep(61)
    assert first.current_rate("bilibili") == pytest.approx(RATE)


def test_tokens_are_taken_in_batches_at_high_rates(db_url, clock):
    budget = SharedRateBudget(create_engine(db_url), {"urls": (1000.0, 100.0)}, clock=clock.time, sleep=clock.sleep)
    transactions = []
    event.listen(budget._engine, "begin", lambda conn: transactions.append(1))

    for _ in range(50):
        budget.acquire("urls")

    assert len(transactions) <= 50 / 16 + 1


def test_stashed_tokens_expire(db_url, clock):
    budget = SharedRateBudget(
        create_engine(db_url), {"urls": (1000.0, 100.0)}, clock=clock.time, sleep=clock.sleep, stash_ttl_s=1.0
    )
    budget.acquire("urls")  # takes a batch, stashes the rest
    clock.sleep(5)
    transactions = []
    event.listen(budget._engine, "begin", lambda conn: transactions.append(1))

    budget.acquire("urls")

    assert transactions  # went back to the database instead of spending an old batch


def test_a_new_configuration_is_adopted_by_an_existing_row(db_url, clock):
    shared(db_url, clock)
    faster = SharedRateBudget(create_engine(db_url), {"bilibili": (20.0, 8.0)}, clock=clock.time, sleep=clock.sleep)
    assert faster.current_rate("bilibili") == pytest.approx(20.0)


def test_platforms_without_a_limit_are_not_throttled(db_url, clock):
    budget = shared(db_url, clock)
    for _ in range(100):
        budget.acquire("weibo")
    assert clock.sleeps == []


def test_in_memory_budget_spends_the_burst_then_paces(clock):
    budget = InMemoryRateBudget({"weibo": (2.0, 3.0)}, clock=clock.time, sleep=clock.sleep)
    start = clock.now

    for _ in range(7):
        budget.acquire("weibo")

    assert clock.now - start == pytest.approx((7 - 3) / 2.0)


def test_in_memory_penalty_lowers_then_restores_the_rate(clock):
    budget = InMemoryRateBudget({"weibo": (2.0, 3.0)}, clock=clock.time, sleep=clock.sleep)
    budget.penalize("weibo", factor=0.25, seconds=30)
    assert budget.current_rate("weibo") == pytest.approx(0.5)
    clock.sleep(30)
    assert budget.current_rate("weibo") == pytest.approx(2.0)


def test_penalties_compound_but_never_stop_a_platform():
    bucket = Bucket(tokens=5, updated_at=0, rate=4, base_rate=4, burst=5)
    for _ in range(20):
        bucket = bucket.penalized(now=0, factor=0.5, seconds=10)
    assert bucket.rate == pytest.approx(4 / 64) and bucket.tokens <= 0


def test_refill_spans_the_end_of_a_penalty():
    bucket = Bucket(tokens=0, updated_at=0, rate=1, base_rate=4, burst=100, slow_until=10)
    refilled = bucket.refilled(now=12)
    assert refilled.tokens == pytest.approx(10 * 1 + 2 * 4) and refilled.rate == 4 and refilled.slow_until == 0


def test_concurrency_slots_are_capped_per_platform(clock):
    budget = InMemoryRateBudget({}, concurrency={"facebook": 2}, clock=clock.time, sleep=clock.sleep)
    with budget.slot("facebook"), budget.slot("facebook"):
        assert budget.slot("facebook").acquire(blocking=False) is False
    with budget.slot("facebook"):
        pass  # released again
    with budget.slot("weibo"), budget.slot("weibo"), budget.slot("weibo"):
        pass  # uncapped platform

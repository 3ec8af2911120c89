"""Signed media URLs are re-resolved when older than their lifetime or when the CDN answers 403."""
import hashlib
import time

import pytest
import requests
from sqlalchemy import update

from media_crawler.config import load_config
from media_crawler.models import DayWindow
from media_crawler.pipeline.discover import discover
from media_crawler.pipeline.download import download_partition
from media_crawler.pipeline.runtime import Runtime
from media_crawler.pipeline.verify_commit import commit_partition, verify_partition
from media_crawler_sim.app import Behaviour
from media_crawler_sim.server import Simulator
from media_crawler.store.ledger import T
from media_crawler_tests.conftest import write_config

SIGNED_SOURCES = [{"bilibili": "user 12345"}, {"weibo": "user 678"}, {"facebook": "page 42"}]


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clocked_sim():
    clock = Clock(time.time())
    with Simulator(seed=1, port=0, behaviour=Behaviour(url_lifetime_s=600, clock=clock)) as sim:
        yield sim, clock


def crawl_stages(runtime, config, days, between=None):
    for source in config.sources:
        for day in days:
            discover(runtime, source, DayWindow.parse(day))
    if between:
        between()
    for source in config.sources:
        download_partition(runtime, source, None)
        verify_partition(runtime, source, None)
        commit_partition(runtime, source, None)


def status_counts(sim, status: str) -> int:
    stats = requests.get(f"{sim.base_url}/_sim/stats", timeout=5).json()
    return sum(entry["statuses"].get(status, 0) for path, entry in stats["by_path"].items() if path.startswith("/media"))


def assert_complete(runtime, sim):
    tasks = runtime.ledger.tasks()
    assert tasks and {t.state for t in tasks} == {"committed"}, {(t.canonical_url, t.state, t.error_class) for t in tasks if t.state != "committed"}
    for task in tasks:
        assert hashlib.sha256(runtime.store.path_for(task.sha256).read_bytes()).hexdigest() == task.sha256


def test_a_403_from_the_cdn_re_resolves_the_url(crawl_home, clocked_sim):
    sim, clock = clocked_sim
    config = load_config(write_config(crawl_home, sim, SIGNED_SOURCES, rate_waits=False))
    runtime = Runtime.from_config(config)
    days = sim.truth()["days"]

    def expire_every_signature():
        clock.now += 3 * 3600  # the ledger still thinks the URLs are fresh; the CDN disagrees

    crawl_stages(runtime, config, days, between=expire_every_signature)
    assert status_counts(sim, "403") > 0
    assert_complete(runtime, sim)


def test_urls_older_than_their_lifetime_are_re_resolved_before_download(crawl_home, clocked_sim):
    sim, clock = clocked_sim
    config = load_config(write_config(crawl_home, sim, SIGNED_SOURCES, rate_waits=False))
    runtime = Runtime.from_config(config)
    days = sim.truth()["days"]

    def age_the_ledger_and_the_cdn():
        clock.now += 3 * 3600
        with runtime.ledger.engine.begin() as conn:
            conn.execute(update(T).values(resolved_at=0.0))

    crawl_stages(runtime, config, days, between=age_the_ledger_and_the_cdn)
    assert status_counts(sim, "403") == 0  # resolved up front: the CDN never saw a stale URL
    assert_complete(runtime, sim)

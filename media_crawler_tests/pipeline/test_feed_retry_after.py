"""A feed that answers 429 with Retry-After: its step comes back after the time asked, and the platform slows down."""
from __future__ import annotations

import pytest
import yaml

from media_crawler.config import load_config
from media_crawler.defs.assets import STEP_RETRY, feed_retry_wait
from media_crawler.models import DayWindow
from media_crawler.pipeline.discover import discover_sources
from media_crawler.pipeline.runtime import Runtime
from media_crawler.store.schema import rate_budget
from media_crawler_tests.one_answer_server import one_answer_server

DAY = "2026-11-27"
RETRY_AFTER_S = 30


@pytest.fixture
def limited_feed():
    with one_answer_server(429, headers={"Retry-After": str(RETRY_AFTER_S)}) as origin:
        yield origin


def test_a_rate_limited_feed_is_retried_after_its_retry_after_and_slows_its_platform(crawl_home, limited_feed):
    crawl_home.mkdir(parents=True, exist_ok=True)
    path = crawl_home / "sources.yaml"
    path.write_text(yaml.safe_dump({"sources": [{"urls": f"{limited_feed}/feed.json"}], "allow_hosts": [limited_feed],
                                    "platforms": {"urls": {"rate": 50, "burst": 50}},
                                    "store": str(crawl_home / "store"),
                                    "ledger_url": f"sqlite:///{crawl_home / 'ledger.db'}"}))
    config = load_config(path)
    runtime = Runtime.from_config(config)
    found = discover_sources(runtime, config.sources, DayWindow.parse(DAY), run_id="run-1")

    [failure] = found.failures
    assert failure.error.error_class.value == "rate_limited" and failure.error.retry_after == RETRY_AFTER_S
    # media_records raises RetryRequested(seconds_to_wait=this): the step comes back when the platform said.
    assert feed_retry_wait(found, retry_number=0) >= RETRY_AFTER_S
    assert feed_retry_wait(found, retry_number=STEP_RETRY.max_retries) is None, "then the partition fails, named"
    with runtime.ledger.engine.connect() as conn:
        row = conn.execute(rate_budget.select().where(rate_budget.c.platform == "urls")).one()
    assert row.rate < row.base_rate == 50, "the platform's shared rate dropped"

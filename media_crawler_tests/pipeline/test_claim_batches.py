"""A download step claims its partition in batches and never takes back a row it already tried."""
from __future__ import annotations

from dataclasses import replace
from datetime import date

from media_crawler import errors
from media_crawler.config import load_config
from media_crawler.models import DayWindow
from media_crawler.pipeline import download
from media_crawler.pipeline.discover import discover
from media_crawler.pipeline.download import download_partition
from media_crawler.pipeline.runtime import Runtime
from media_crawler_tests.recovery.support import write_recovery_config

DAY = DayWindow(date(2026, 11, 27))


def test_batches_cover_the_partition_once_even_when_failures_could_be_retaken(crawl_home, simulator, monkeypatch):
    monkeypatch.setattr(download, "CLAIM_BATCH", 2)
    monkeypatch.setattr(errors, "ATTEMPTS", replace(errors.ATTEMPTS, in_step=1))  # no in-step sleeps
    feed = f"{simulator.base_url}/urls/errors.json"  # 404, 500 forever, 429 once, cut once, ok ones
    config = load_config(write_recovery_config(crawl_home, simulator, [{"urls": feed}]))
    runtime = Runtime.from_config(config)
    source = config.sources[0]
    discover(runtime, source, DAY)
    rows = runtime.ledger.tasks()
    # ignore_backoff: a failure this step records is claimable at once by the rules of a
    # step retry; the batches must still not take it back within this step.
    report = download_partition(runtime, source, DAY, ignore_backoff=True)
    assert report.extra["items_claimed"] == len(rows) > download.CLAIM_BATCH
    tried = {task.id: task.attempts for task in runtime.ledger.tasks()}
    assert set(tried.values()) <= {1}, tried
    assert not [task for task in runtime.ledger.tasks() if task.state == "downloading"], "no lease left behind"

"""Fixtures for the observability tests: one crawl with injected faults shared by the package, empty ledgers."""
from __future__ import annotations

from dataclasses import replace

import pytest
import requests
from dagster import DagsterInstance

from media_crawler import errors
from media_crawler_sim.sources import DEMO_START_DAY
from media_crawler.config import config_from_dict, load_config
from media_crawler.store.ledger import Ledger
from media_crawler_tests.observe.support import captured_crawl, dagster_log_settings, write_sources
from media_crawler_tests.shard_support import one_source_per_shard


@pytest.fixture(scope="package")
def faulty_crawl(tmp_path_factory, simulator):
    """One day of: the URL feeds with faults (404, 500 forever, 429 once, cut once, HTML
    instead of a JPEG), a Bilibili feed that is not JSON, a Facebook page crawled without
    a token (auth), and the well-behaved URL demo feed, all through Dagster.

    Two test-speed knobs, not behaviour changes: step retries wait 0 s instead of
    5-20 s, and each step tries an item twice instead of four times.
    """
    import media_crawler.defs.assets as assets

    home = tmp_path_factory.mktemp("faulty")
    base = simulator.base_url
    requests.post(f"{base}/_sim/stats/reset", timeout=5)  # "fails once" fails once again
    day = requests.get(f"{base}/_sim/truth", timeout=5).json()["days"][-1]
    named = {"errors": {"urls": f"{base}/urls/errors.json"}, "html": {"urls": f"{base}/urls/html.json"},
             "bad_feed": {"bilibili": "user 666"}, "no_token": {"facebook": "page 42"},
             "demo": {"urls": f"{base}/urls/demo.json"}}
    # Each source in a shard of its own and each partition in a run of its own: the tests
    # read one partition's run per source (ranged runs: pipeline/test_ranged_runs.py).
    partitions = {"start_day": DEMO_START_DAY, "shards": 16, "shards_per_run": 1}
    layout = config_from_dict({"partitions": partitions}).layout
    config_path = write_sources(home, base, one_source_per_shard(list(named.values()), layout), partitions=partitions)
    config = load_config(config_path)
    source_keys = dict(zip(named, (source.key for source in config.sources)))
    with pytest.MonkeyPatch.context() as patch, \
            DagsterInstance.ephemeral(settings=dagster_log_settings(home / "dagster.jsonl")) as instance:
        patch.delenv("FB_ACCESS_TOKEN", raising=False)  # named in credential_env: auth before any request
        patch.setattr(assets, "DOWNLOAD_RETRY_WAIT_S", 0.0)
        patch.setattr(errors, "ATTEMPTS", replace(errors.ATTEMPTS, in_step=2))
        with captured_crawl(config_path, [day], instance, home) as crawl:
            crawl.source_keys = source_keys  # "errors", "html", "bad_feed", "no_token", "demo"
            crawl.shards = {name: config.layout.shard_of(key) for name, key in source_keys.items()}
            patch.undo()  # the checks below run with the environment as it was
            yield crawl


@pytest.fixture(scope="module")
def postgres_url_factory(postgres):
    """Throwaway PostgreSQL databases: the reports' SQL must run there too."""
    return postgres.create


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_ledger(request, tmp_path):
    """An empty ledger on each database the crawler supports."""
    if request.param == "sqlite":
        return Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    return Ledger(request.getfixturevalue("postgres_url_factory")())

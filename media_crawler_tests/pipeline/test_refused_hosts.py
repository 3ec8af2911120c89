"""Media refused because this deployment does not list their host: failed as host_not_allowed (host and
setting named), the partition not green, and stored once the host is listed and the partition re-run."""
import hashlib

import pytest
import requests
import yaml
from dagster import DagsterInstance

from media_crawler.commands.crawl import crawl
from media_crawler.config import load_config
from media_crawler.store.ledger import Ledger
from media_crawler.store.reports.failures import failure_report
from media_crawler_tests.conftest import write_config


@pytest.fixture
def instance():
    with DagsterInstance.ephemeral() as inst:
        yield inst


def weibo_config_without_allow_hosts(crawl_home, simulator):
    """The demo's Weibo source, its media on the simulator's origin, which `allow_hosts` no longer lists
    (the API still reaches it: `platforms.weibo.api_base` names that origin)."""
    from media_crawler_sim.sources import demo_sources

    weibo = [entry for entry in demo_sources(simulator.base_url)["sources"] if "weibo" in entry][:1]
    path = write_config(crawl_home, simulator, weibo, rate_waits=False)
    data = yaml.safe_load(path.read_text())
    listed = data.pop("allow_hosts")
    path.write_text(yaml.safe_dump(data))
    return path, data, listed


def test_media_of_an_unlisted_host_fail_as_host_not_allowed_and_are_stored_after_listing_it(
        crawl_home, simulator, instance):
    path, data, listed = weibo_config_without_allow_hosts(crawl_home, simulator)
    day = requests.get(f"{simulator.base_url}/_sim/truth", timeout=5).json()["days"][-1]

    refused = crawl(path, [day], instance=instance)

    assert refused.failed, "a partition with refused items must not report success"
    assert "unfinished by class: host_not_allowed" in refused.failed[0].error
    assert "list the refused hosts" in refused.failed[0].error  # a re-run alone would not help
    config = load_config(path)
    ledger = Ledger(config.ledger_url)
    rows = ledger.tasks()
    assert rows and {(task.state, task.error_class) for task in rows} == {("failed", "host_not_allowed")}
    report = failure_report(ledger.engine, now=9e9, since=None, platform=None).as_json()
    [group] = report["gave_up"]
    assert group["error_class"] == "host_not_allowed" and group["count"] == len(rows)
    host = simulator.base_url.split("//", 1)[1]
    assert f"'{host}'" in group["sample_message"]  # the entry to add
    assert "platforms.weibo.media_hosts or allow_hosts" in group["sample_message"]  # where to add it
    assert not list((config.store_root / "sha256").glob("*/*/*"))

    data["allow_hosts"] = listed
    path.write_text(yaml.safe_dump(data))
    again = crawl(path, [day], instance=instance)

    assert not again.failed, [outcome.error for outcome in again.failed]
    rows = ledger.tasks()
    assert {task.state for task in rows} == {"committed"}
    stored = {blob.name: blob for blob in (config.store_root / "sha256").glob("*/*/*") if blob.is_file()}
    assert stored and set(stored) == {task.sha256 for task in rows}
    for name, blob in stored.items():
        assert hashlib.sha256(blob.read_bytes()).hexdigest() == name

"""All four assets through Dagster against the simulator: store equals truth, re-runs are no-ops, failures are classified."""
import hashlib

import pytest
import requests
from dagster import DagsterInstance

from media_crawler.commands.crawl import crawl
from media_crawler.commands.demo import store_snapshot, summary_lines
from media_crawler.config import load_config
from media_crawler.store.ledger import Ledger
from media_crawler_tests.conftest import write_config


def blobs(store_root):
    return {p.name: p for p in (store_root / "sha256").glob("*/*/*") if p.is_file()}


@pytest.fixture
def instance():
    with DagsterInstance.ephemeral() as inst:
        yield inst


def demo_summary(demo_config, outcome, before, after, capsys) -> str:
    """What `media-crawler demo` prints after a crawl (its own crawl is this one, on the
    session's simulator: a second demo run of its own would cost another full crawl)."""
    capsys.readouterr()
    home = demo_config.parent
    print("\n".join(summary_lines(home, home / "dagster_home", demo_config, home / "crawl.log.jsonl", outcome, before, after)))
    return capsys.readouterr().out


def test_full_crawl_matches_simulator_truth_and_reruns_download_nothing(demo_config, simulator, instance, capsys):
    truth = requests.get(f"{simulator.base_url}/_sim/truth", timeout=5).json()
    config = load_config(demo_config)
    before = store_snapshot(config.store_root)
    outcome = crawl(demo_config, truth["days"], instance=instance)
    assert not outcome.failed, [(p.source_key, p.day, p.error) for p in outcome.failed]
    after = store_snapshot(config.store_root)
    assert f"this run: {len(after)} new blobs" in demo_summary(demo_config, outcome, before, after, capsys)

    stored = blobs(config.store_root)
    expected = {item["sha256"] for item in truth["media"]}
    assert set(stored) == expected
    for name, path in stored.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == name
    assert not list((config.store_root / "staging").glob("*.part"))
    kinds = {item["kind"] for item in truth["media"]}
    assert {"image", "video"} <= kinds

    requests.post(f"{simulator.base_url}/_sim/stats/reset", timeout=5)
    again = crawl(demo_config, truth["days"], instance=instance)
    assert not again.failed
    stats = requests.get(f"{simulator.base_url}/_sim/stats", timeout=5).json()
    media_requests = sum(n for path, n in stats["requests"].items() if path.startswith("/media"))
    assert media_requests == 0
    assert set(blobs(config.store_root)) == expected
    summary = demo_summary(demo_config, again, after, store_snapshot(config.store_root), capsys)
    assert "this run: nothing new to download: every item was already seen" in summary
    assert f"store: {len(expected)} blobs" in summary and "partitions: " in summary and " 0 failed" in summary


def test_invalid_feed_json_fails_the_partition_with_a_parse_error(crawl_home, simulator, instance):
    path = write_config(crawl_home, simulator, [{"bilibili": "user 666"}])
    truth = requests.get(f"{simulator.base_url}/_sim/truth", timeout=5).json()
    outcome = crawl(path, truth["days"][-1:], instance=instance)
    assert outcome.failed and "parse_error" in outcome.failed[0].error
    ledger = Ledger(load_config(path).ledger_url)
    from media_crawler.store.schema import feed_errors

    with ledger.engine.connect() as conn:
        rows = conn.execute(feed_errors.select()).fetchall()
    assert rows and rows[0].error_class == "parse_error"


def test_html_served_as_media_is_a_classified_failure_and_never_stored(crawl_home, simulator, instance, monkeypatch):
    from media_crawler.defs import assets

    monkeypatch.setattr(assets, "DOWNLOAD_RETRY_WAIT_S", 0.0)  # the step's retries, without 35 s of their waits
    path = write_config(crawl_home, simulator, [{"urls": f"{simulator.base_url}/urls/html.json"}])
    truth = requests.get(f"{simulator.base_url}/_sim/truth", timeout=5).json()
    outcome = crawl(path, truth["days"][-1:], instance=instance)
    assert outcome.failed, "a partition with an item still failing must not report success"
    config = load_config(path)
    ledger = Ledger(config.ledger_url)
    failed = [t for t in ledger.tasks() if t.state != "committed"]
    assert failed and {t.error_class for t in failed} == {"bad_signature"}
    for name, blob in blobs(config.store_root).items():
        assert not blob.read_bytes().lstrip().lower().startswith(b"<")
    assert not list((config.store_root / "staging").glob("*.part"))

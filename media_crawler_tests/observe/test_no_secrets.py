"""A fake Facebook token and Bilibili SESSDATA cookie reach no log line, ledger column, event log entry or asset metadata."""
import sqlite3
from urllib.parse import quote

import pytest
import requests
from dagster import AssetKey, DagsterInstance
from dagster._serdes import serialize_value

from media_crawler_sim.sources import DEMO_START_DAY
from media_crawler.config import load_config
from media_crawler.definitions import crawl_assets_for
from media_crawler_tests.observe.support import captured_crawl, dagster_log_settings, write_sources

FAKE_TOKEN = "EAAObsFakeToken0b5e7d21c9"
FAKE_SESSDATA = "obsFakeSessdata5a8c3e1f"


def leaked(text: str) -> list[str]:
    """The secret forms found in text: as set, and URL-encoded as they would be in a query."""
    forms = {FAKE_TOKEN, FAKE_SESSDATA, quote(FAKE_TOKEN, safe=""), quote(FAKE_SESSDATA, safe="")}
    return [form for form in forms if form in text]


@pytest.fixture(scope="module")
def secret_crawl(tmp_path_factory, simulator):
    home = tmp_path_factory.mktemp("secrets")
    base = simulator.base_url
    day = requests.get(f"{base}/_sim/truth", timeout=5).json()["days"][-1]
    # Page 4040 does not exist: its Graph error passes the token-bearing request through error handling.
    # One shard per source (16 per platform): the tests read one partition per source.
    config_path = write_sources(home, base, [{"facebook": "page 42"}, {"bilibili": "user 12345"},
                                             {"facebook": "page 4040"}],
                                partitions={"start_day": DEMO_START_DAY, "shards": 16},
                                bilibili={"credential_env": {"sessdata": "BILIBILI_SESSDATA"}})
    layout = load_config(config_path).layout
    assert len({layout.shard_of(key) for key in ("facebook-42", "facebook-4040")}) == 2
    with pytest.MonkeyPatch.context() as patch, \
            DagsterInstance.ephemeral(settings=dagster_log_settings(home / "dagster.jsonl")) as instance:
        patch.setenv("FB_ACCESS_TOKEN", FAKE_TOKEN)
        patch.setenv("BILIBILI_SESSDATA", FAKE_SESSDATA)
        with captured_crawl(config_path, [day], instance, home) as crawl:
            yield crawl


def test_the_crawl_really_sent_the_secrets(secret_crawl):
    ok = {key for p in secret_crawl.outcome.partitions if p.success for key in p.sources}
    assert {"facebook-42", "bilibili-12345"} <= ok, secret_crawl.outcome.partitions  # the Graph API wants a token
    assert any(r["platform"] == "facebook" and r["stage"] == "commit" for r in secret_crawl.item_records())


def test_no_log_line_contains_a_secret(secret_crawl):
    lines = secret_crawl.raw_lines()
    assert len(lines) > 50
    assert [line for line in lines if leaked(line)] == []


def test_no_ledger_row_of_any_table_contains_a_secret(secret_crawl):
    path = load_config(secret_crawl.config_path).ledger_url.split("///", 1)[1]
    with sqlite3.connect(path) as conn:
        dump = "\n".join(conn.iterdump())  # every table, every row, every column
    assert "mc_tasks" in dump and "mc_cursors" in dump and "mc_feed_errors" in dump
    assert "INSERT INTO \"mc_feed_errors\"" in dump, "the missing page was recorded"
    assert leaked(dump) == []


def test_no_event_log_entry_or_materialization_metadata_contains_a_secret(secret_crawl):
    instance = secret_crawl.instance
    runs = instance.get_run_records()
    assert len(runs) == 3
    for record in runs:
        run = record.dagster_run
        assert leaked(serialize_value(run)) == []  # run config and tags
        for entry in instance.all_logs(run.run_id):
            assert leaked(serialize_value(entry)) == [], entry.message
    for asset in crawl_assets_for(load_config(secret_crawl.config_path)):
        key = AssetKey(asset.key.path)
        for materialization in instance.fetch_materializations(key, limit=100).records:
            metadata = materialization.asset_materialization.metadata
            assert metadata and leaked(serialize_value(metadata)) == []

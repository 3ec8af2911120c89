"""`media-crawler failures` after a crawl with injected faults: each kind named, counted and timed, retrying apart from gave-up."""
import json
from datetime import datetime

from sqlalchemy import select

from media_crawler.cli import main
from media_crawler.config import load_config
from media_crawler.timestamps import utc_timestamp
from media_crawler.store import schema
from media_crawler.store.ledger import Ledger


def failures_json(capsys, *args) -> dict:
    capsys.readouterr()
    assert main(["failures", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def by_kind(groups: list[dict]) -> dict[tuple[str, str, str], dict]:
    return {(g["platform"], g["stage"], g["error_class"]): g for g in groups}


def parse_ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_each_injected_failure_kind_is_counted_in_its_section(faulty_crawl, capsys):
    report = failures_json(capsys, "--config", str(faulty_crawl.config_path))
    gave_up, retrying = by_kind(report["gave_up"]), by_kind(report["retrying"])
    assert set(gave_up) == {("urls", "download", "not_found"), ("bilibili", "fetch", "parse_error"),
                            ("facebook", "fetch", "auth")}
    assert set(retrying) == {("urls", "download", "http_5xx"), ("urls", "download", "bad_signature")}
    assert all(group["count"] == 1 for group in [*gave_up.values(), *retrying.values()])
    assert gave_up[("urls", "download", "not_found")]["states"] == {"gone": 1}
    assert report["totals"] == {"gave_up": 3, "retrying": 2}
    assert retrying[("urls", "download", "http_5xx")]["canonical_urls"][0].endswith("/errors/broken.jpg")
    assert gave_up[("facebook", "fetch", "auth")]["canonical_urls"] == [f"facebook-42 {faulty_crawl.day}"]
    assert "next_retry_at" in retrying[("urls", "download", "http_5xx")]
    for group in [*gave_up.values(), *retrying.values()]:
        assert group["run_ids"] and set(group["run_ids"]) <= set(faulty_crawl.run_ids.values()), group
        assert group["sample_message"]


def test_first_and_last_seen_are_the_ledger_times(faulty_crawl, capsys):
    report = failures_json(capsys, "--config", str(faulty_crawl.config_path))
    ledger = Ledger(load_config(faulty_crawl.config_path).ledger_url)
    with ledger.engine.connect() as conn:
        failed_at = dict(conn.execute(select(schema.tasks.c.error_class, schema.tasks.c.failed_at)
                                      .where(schema.tasks.c.state != "committed")).fetchall())
        page_at = dict(conn.execute(select(schema.feed_errors.c.error_class, schema.feed_errors.c.at)).fetchall())
    for group in report["gave_up"] + report["retrying"]:
        expected = failed_at.get(group["error_class"]) or page_at[group["error_class"]]
        assert group["first_seen"] == group["last_seen"] == utc_timestamp(expected)
        assert faulty_crawl.started - 0.01 <= parse_ts(group["first_seen"]) <= faulty_crawl.finished + 0.01


def test_platform_and_since_narrow_the_report(faulty_crawl, capsys):
    only_urls = failures_json(capsys, "--config", str(faulty_crawl.config_path), "--platform", "urls")
    assert {g["platform"] for g in only_urls["gave_up"] + only_urls["retrying"]} == {"urls"}
    future = failures_json(capsys, "--config", str(faulty_crawl.config_path), "--since", "2999-01-01")
    assert future["totals"] == {"gave_up": 0, "retrying": 0}


def test_text_report_shows_both_sections_with_urls_and_runs(faulty_crawl, capsys):
    capsys.readouterr()
    assert main(["failures", "--config", str(faulty_crawl.config_path), "--since", "1h"]) == 0
    text = capsys.readouterr().out
    assert text.index("GAVE UP") < text.index("RETRYING")
    assert "not_found" in text and "/errors/missing.jpg" in text and "runs: " in text
    assert main(["failures", "--since", "soon"]) == 2

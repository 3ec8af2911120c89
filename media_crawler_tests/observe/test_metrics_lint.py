"""`promtool check metrics` (Prometheus 2.42's lint) passes on the exporter's text: an empty
ledger, the faulty crawl, a dead ledger. (The outage drill checks its scrapes too.)"""
from __future__ import annotations

from prometheus_client import generate_latest

from media_crawler.config import config_from_dict, load_config
from media_crawler.observe.metrics import ledger_registry
from media_crawler.store.database import get_engine
from media_crawler.store.ledger import Ledger
from media_crawler_tests.observe import promtool


def assert_clean(text: str) -> None:
    result = promtool.check_metrics(text)
    assert result.returncode == 0 and not (result.stdout + result.stderr).strip(), result.stdout + result.stderr


def test_promtool_check_metrics_passes_on_every_scrape(faulty_crawl, tmp_path):
    config = load_config(faulty_crawl.config_path)
    text = generate_latest(ledger_registry(Ledger(config.ledger_url).engine, config)).decode()
    assert "media_crawler_stage_delay_seconds_bucket" in text and 'quantile="' not in text
    assert_clean(text)
    empty = config_from_dict({"store": str(tmp_path / "store"), "ledger_url": f"sqlite:///{tmp_path / 'empty.db'}"})
    assert_clean(generate_latest(ledger_registry(Ledger(empty.ledger_url).engine, empty)).decode())
    (tmp_path / "dead.db").mkdir()  # every query fails: ledger_up 0 and nothing else
    assert_clean(generate_latest(ledger_registry(get_engine(f"sqlite:///{tmp_path / 'dead.db'}"), empty)).decode())

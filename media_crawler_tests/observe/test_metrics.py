"""Prometheus metrics: parseable text, counters equal to the ledger, bounded labels, served over HTTP."""
import requests
from prometheus_client import generate_latest, start_http_server
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select

from media_crawler.cli import main
from media_crawler.config import load_config
from media_crawler.observe.metrics import ledger_registry
from media_crawler.store import schema
from media_crawler.store.database import get_engine
from media_crawler.store.ledger import Ledger

T = schema.tasks
ALLOWED_LABELS = {"platform", "stage", "error_class", "reason", "state", "le"}


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """(sample name, sorted labels) -> value; parsing fails loudly on malformed text."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def scrape_once(capsys, config_path) -> str:
    capsys.readouterr()
    assert main(["metrics", "--once", "--config", str(config_path)]) == 0
    return capsys.readouterr().out


def test_counters_match_the_ledger(faulty_crawl, capsys):
    values = samples(scrape_once(capsys, faulty_crawl.config_path))
    ledger = Ledger(load_config(faulty_crawl.config_path).ledger_url)
    with ledger.engine.connect() as conn:
        committed = dict(conn.execute(select(T.c.platform, func.count()).where(T.c.state == "committed")
                                      .group_by(T.c.platform)).fetchall())
        size = conn.execute(select(func.sum(T.c.size)).where(T.c.state == "committed")).scalar_one()
    assert values[("media_crawler_ledger_up", ())] == 1
    for platform, count in committed.items():
        assert values[("media_crawler_committed_items_total", (("platform", platform),))] == count
        assert values[("media_crawler_items", (("platform", platform), ("state", "committed")))] == count
    assert sum(v for (name, _), v in values.items() if name == "media_crawler_committed_bytes_total") == size
    failing = {labels: v for (name, labels), v in values.items() if name == "media_crawler_failing_items"}
    assert failing == {
        (("error_class", "not_found"), ("platform", "urls"), ("stage", "download"), ("state", "gone")): 1,
        (("error_class", "http_5xx"), ("platform", "urls"), ("stage", "download"), ("state", "retry_wait")): 1,
        (("error_class", "bad_signature"), ("platform", "urls"), ("stage", "download"), ("state", "retry_wait")): 1,
        (("error_class", "parse_error"), ("platform", "bilibili"), ("stage", "fetch"), ("state", "page")): 1,
        (("error_class", "auth"), ("platform", "facebook"), ("stage", "fetch"), ("state", "page")): 1,
    }
    assert values[("media_crawler_platform_auth_failures", (("platform", "facebook"),))] == 1
    for stage in ("queue", "claim", "execution", "verify", "commit"):  # histograms, counting committed items
        labels = (("platform", "urls"), ("stage", stage))
        assert values[("media_crawler_stage_delay_seconds_count", labels)] == committed["urls"]
        assert values[("media_crawler_stage_delay_seconds_bucket", (("le", "+Inf"), *labels))] == committed["urls"]
        assert ("media_crawler_stage_delay_seconds_sum", labels) in values
    assert not any(dict(labels).get("quantile") for _name, labels in values), "no quantile gauges any more"
    assert values[("media_crawler_waiting_items", (("platform", "urls"), ("reason", "retry_backoff")))] == 2
    assert values[("media_crawler_items_finished_total",
                   (("error_class", "not_found"), ("platform", "urls"), ("state", "gone")))] == 1


def test_labels_are_bounded_never_urls_or_ids(faulty_crawl, capsys):
    for family in text_string_to_metric_families(scrape_once(capsys, faulty_crawl.config_path)):
        for sample in family.samples:
            assert set(sample.labels) <= ALLOWED_LABELS, sample
            for value in sample.labels.values():
                assert "/" not in value and not value.startswith("t_") and len(value) < 20, sample


def test_served_over_http_and_reports_a_dead_ledger(faulty_crawl, tmp_path):
    config = load_config(faulty_crawl.config_path)
    registry = ledger_registry(Ledger(config.ledger_url).engine, config)
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        answer = requests.get(f"http://127.0.0.1:{server.server_port}/metrics", timeout=5)
    finally:
        server.shutdown()
        thread.join(timeout=5)
    assert answer.status_code == 200
    assert samples(answer.text)[("media_crawler_ledger_up", ())] == 1

    (tmp_path / "ledger.db").mkdir()  # a folder where the database file should be: every query fails
    broken = get_engine(f"sqlite:///{tmp_path / 'ledger.db'}")
    down = samples(generate_latest(ledger_registry(broken, config)).decode())
    assert down == {("media_crawler_ledger_up", ()): 0}

"""`media-crawler status` after a crawl with injected faults: backlog, throughput, platform health, stage percentiles, disk."""
import json
import time

from sqlalchemy import func, select, update

from media_crawler.cli import main
from media_crawler.config import load_config
from media_crawler.models import Lease, MediaRecord
from media_crawler.store.reports.counts import expired_leases
from media_crawler.store.reports.delays import percentile
from media_crawler.store import schema
from media_crawler.store.ledger import Ledger
from media_crawler.store.leases import claim_downloads

T = schema.tasks


def status_json(capsys, config_path) -> dict:
    capsys.readouterr()
    assert main(["status", "--json", "--config", str(config_path)]) == 0
    return json.loads(capsys.readouterr().out)


def test_status_reports_backlog_throughput_and_platform_health(faulty_crawl, capsys):
    status = status_json(capsys, faulty_crawl.config_path)
    ledger = Ledger(load_config(faulty_crawl.config_path).ledger_url)
    with ledger.engine.connect() as conn:
        committed, size = conn.execute(select(func.count(), func.sum(T.c.size)).where(T.c.state == "committed")).one()
    assert status["states"] == {"committed": committed, "gone": 1, "retry_wait": 2}
    assert status["backlog"]["retry_wait"]["count"] == 2
    assert sum(status["backlog"]["retry_wait"]["ages"].values()) == 2
    assert status["backlog"]["retry_wait"]["due_now"] == 0  # both wait for their backoff
    assert status["throughput_1h"]["items_committed"] == committed
    assert status["throughput_1h"]["bytes_committed"] == size
    assert status["platforms"]["facebook"]["status"] == "auth_failed"
    assert status["platforms"]["facebook"]["auth_failed_since"].endswith("Z")
    assert status["platforms"]["urls"]["status"] == "ok"
    assert status["feed_errors_unresolved"] == {"bilibili/parse_error": 1, "facebook/auth": 1}
    assert status["uncertain"]["count"] == 0
    assert status["disk"]["free_bytes"] > 0 and status["disk"]["below_minimum"] is False


def test_each_stage_delay_has_its_own_percentiles(faulty_crawl, capsys):
    delays = status_json(capsys, faulty_crawl.config_path)["stage_delays_s"]
    assert list(delays) == ["queue", "claim", "execution", "verify", "commit"]
    for name, delay in delays.items():
        assert delay["count"] > 0, name
        assert 0 <= delay["p50"] <= delay["p95"] <= delay["max"], (name, delay)


def test_text_status_is_readable(faulty_crawl, capsys):
    capsys.readouterr()
    assert main(["status", "--config", str(faulty_crawl.config_path)]) == 0
    text = capsys.readouterr().out
    for expected in ("backlog", "retry_wait", "last hour", "facebook  auth_failed", "stage delays", "p95", "disk:"):
        assert expected in text, expected
    assert "feed pages failing: bilibili parse_error: 1, facebook auth: 1\n" in text
    assert "{" not in text and "}" not in text, "no raw Python dict reaches a person"


def test_items_leased_by_a_silent_worker_are_uncertain(crawl_home, capsys):
    ledger = Ledger(f"sqlite:///{crawl_home / 'ledger.db'}")
    record = MediaRecord(platform="urls", item_id="x1", variant="file", kind="image",
                         canonical_url="http://127.0.0.1/x1.jpg", media_url="http://127.0.0.1/x1.jpg")
    ledger.record_discovered([record], source_key="urls-x", day="2026-11-27")
    claim_downloads(ledger, source_key="urls-x", day="2026-11-27", lease=Lease("dead-worker:1", 60))
    with ledger.engine.begin() as conn:  # the worker died: nobody renewed its lease
        conn.execute(update(T).values(lease_expires_at=time.time() - 30))
    leases = expired_leases(ledger.engine, time.time())
    assert leases["count"] == 1 and leases["by_owner"] == {"dead-worker:1": 1}
    assert leases["by_platform"] == {"urls": 1}
    (crawl_home / "sources.yaml").write_text("sources: []\n")  # the home's ledger, nothing configured
    capsys.readouterr()
    assert main(["status", "--config", str(crawl_home / "sources.yaml")]) == 0
    assert "owners dead-worker:1 (1)" in capsys.readouterr().out


def test_percentile_interpolates_between_ranks():
    assert percentile([], 50) is None
    assert percentile([4.0], 95) == 4.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([float(n) for n in range(1, 101)], 95) == 95.05

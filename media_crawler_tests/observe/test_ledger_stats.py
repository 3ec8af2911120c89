"""Status and metrics numbers on hand-made ledgers (SQLite, PostgreSQL): backlog ages, delays, platform health, scrapes."""

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import insert

from media_crawler.config import config_from_dict
from media_crawler.store.reports import counts, delays, platform_signals
from media_crawler.observe.health import ready
from media_crawler.observe.metrics import ledger_registry
from media_crawler.observe.status import build_status
from media_crawler.store import schema

NOW = 1_800_000_000.0
PLATFORMS = ("bilibili", "weibo", "facebook", "urls")


def add(conn, n, state, *, platform="urls", age=0.0, error_class=None, failed_ago=None, size=None, stamps=None):
    """A row `age` seconds in its state; `stamps` are the stage times as offsets from queued_at."""
    base = NOW - 1000
    times = {name: base + offset for name, offset in (stamps or {}).items()}
    conn.execute(insert(schema.tasks).values(
        platform=platform, item_id=f"i{n}", variant="v", kind="image", source_key="s", day="2026-11-27",
        canonical_url=f"https://example.org/{n}", media_url="https://example.org/m", state=state, attempts=1,
        error_class=error_class, failed_at=None if failed_ago is None else NOW - failed_ago, size=size,
        updated_at=NOW - age, discovered_at=base, queued_at=base, **times))


def fill(ledger):
    with ledger.engine.begin() as conn:
        add(conn, 1, "discovered", age=600)
        add(conn, 2, "discovered", age=7200)
        add(conn, 3, "retry_wait", platform="bilibili", age=30, error_class="rate_limited", failed_ago=30)
        add(conn, 4, "failed", platform="facebook", error_class="auth", failed_ago=600)
        for n, (queue, run) in enumerate([(1, 2), (3, 4), (5, 6), (7, 8), (9, 10)], start=10):
            add(conn, n, "committed", size=100, stamps={
                "claimed_at": queue, "started_at": queue, "finished_at": queue + run, "verified_at": queue + run + 1,
                "committed_at": queue + run + 3})
        conn.execute(insert(schema.rate_budget).values(platform="bilibili", tokens=0, updated_at=NOW, rate=2.5,
                                                       base_rate=5.0, burst=10, slow_until=NOW + 50, in_flight=0))


def test_backlog_delays_and_health_are_computed_per_state_stage_and_platform(empty_ledger):
    fill(empty_ledger)
    engine = empty_ledger.engine
    backlog = counts.backlog(engine, NOW)
    assert backlog["discovered"] == {"count": 2, "oldest_age_s": 7200.0, "ages": {"5m-1h": 1, "1h-24h": 1}}
    assert backlog["retry_wait"]["count"] == 1 and backlog["retry_wait"]["due_now"] == 1
    found = delays.stage_delays(engine, NOW)
    assert found["queue"] == {"count": 5, "p50": 5.0, "p95": 8.6, "max": 9.0, "sum": 25.0}
    assert found["execution"]["p50"] == 6.0 and found["claim"]["max"] == 0.0
    assert found["verify"]["p50"] == 1.0 and found["commit"]["p95"] == 2.0
    health = platform_signals.platform_health(engine, NOW, PLATFORMS)
    assert health["bilibili"]["status"] == "rate_limited" and health["bilibili"]["rate_limited_since"] == NOW - 30
    assert health["bilibili"]["slowed_until"] == NOW + 50 and health["bilibili"]["rate_per_s"] == 2.5
    assert health["facebook"]["status"] == "auth_failed" and health["facebook"]["auth_failures"] == 1
    assert health["urls"]["status"] == "ok"


def test_status_document_and_metrics_agree(empty_ledger, tmp_path):
    fill(empty_ledger)
    config = config_from_dict({"store": str(tmp_path / "store"), "ledger_url": empty_ledger.url})
    status = build_status(empty_ledger.engine, config, NOW)
    assert status["states"] == {"committed": 5, "discovered": 2, "failed": 1, "retry_wait": 1}
    assert status["throughput_1h"]["items_committed"] == 5 and status["throughput_1h"]["bytes_committed"] == 500
    assert status["platforms"]["bilibili"]["slowed_until"].endswith("Z")
    collector_values = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(
            generate_latest(ledger_registry(empty_ledger.engine, config)).decode())
        for sample in family.samples}
    assert collector_values[("media_crawler_committed_bytes_total", (("platform", "urls"),))] == 500
    assert collector_values[("media_crawler_items", (("platform", "urls"), ("state", "discovered")))] == 2
    failing = ("media_crawler_failing_items",
               (("error_class", "auth"), ("platform", "facebook"), ("stage", "download"), ("state", "failed")))
    assert collector_values[failing] == 1


def test_ready_probe_writes_nothing_it_leaves_behind(empty_ledger, tmp_path):
    config = config_from_dict({"store": str(tmp_path / "store"), "ledger_url": empty_ledger.url})
    result = ready(empty_ledger.engine, config, now=NOW)
    assert result.ok, result.reason
    with empty_ledger.engine.connect() as conn:
        assert conn.execute(schema.cursors.select()).fetchall() == []

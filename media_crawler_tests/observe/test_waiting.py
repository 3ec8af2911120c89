"""Why items wait, platform health from every signal, and the cumulative histograms, on
hand-made ledgers (SQLite and PostgreSQL); the schema version that added the wait columns."""
from __future__ import annotations

import time

from sqlalchemy import create_engine, insert, inspect, select, text

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.observe import wait_summary
from media_crawler.store import waits
from media_crawler.store.reports import delays, platform_signals, waiting
from media_crawler.store import schema
from media_crawler.store.database import dispose_engines, migrate
from media_crawler.store.ledger import Ledger
from media_crawler.store.transitions import DownloadFailed, FailedAttempt, HandedBack

NOW = 1_800_000_000.0
PLATFORMS = ("bilibili", "weibo", "facebook", "urls")
_ids = iter(range(1, 1_000_000))


def row(conn, state, *, platform="urls", source_key="urls-s", day="2026-11-27", **columns):
    values = {"platform": platform, "item_id": f"i{next(_ids)}", "variant": "v", "kind": "image",
              "source_key": source_key, "day": day, "canonical_url": "https://example.org/x",
              "media_url": "https://example.org/m", "state": state, "attempts": 1, "queued_at": NOW - 1000,
              "discovered_at": NOW - 1000, "updated_at": NOW - 1000, **columns}
    conn.execute(insert(schema.tasks).values(**values))


def test_every_unfinished_row_has_one_reason_and_since_when(empty_ledger):
    with empty_ledger.engine.begin() as conn:
        row(conn, "discovered", queued_at=NOW - 100)
        row(conn, "downloading", lease_owner="w:1", lease_expires_at=NOW + 60, claimed_at=NOW - 50)
        row(conn, "downloading", platform="bilibili", source_key="bilibili-1", lease_owner="w:1",
            lease_expires_at=NOW + 60, claimed_at=NOW - 40)
        row(conn, "downloading", lease_owner="dead:1", lease_expires_at=NOW - 120, claimed_at=NOW - 300)
        row(conn, "retry_wait", platform="facebook", source_key="facebook-42", next_attempt_at=NOW + 300,
            failed_at=NOW - 10, error_class="rate_limited", wait_reason="retry_backoff", wait_since=NOW - 10,
            wait_cause="rate_limited", retry_after_s=30.0)
        row(conn, "retry_wait", next_attempt_at=NOW - 5, failed_at=NOW - 60, error_class="http_5xx")
        row(conn, "discovered", platform="weibo", source_key="weibo-678", claimed_at=NOW - 210,
            wait_reason="platform_halted", wait_since=NOW - 200, wait_cause="http_5xx")
        # Halted once, claimed again since (then handed back by a dead worker's release): no longer halted.
        row(conn, "discovered", platform="weibo", source_key="weibo-679", queued_at=NOW - 900, claimed_at=NOW - 400,
            wait_reason="platform_halted", wait_since=NOW - 500, wait_cause="http_5xx")
        row(conn, "discovered", platform="bilibili", source_key="bilibili-1", claimed_at=NOW - 70,
            wait_reason="disk_guard", wait_since=NOW - 60, wait_cause="disk_full")
        row(conn, "failed", platform="facebook", source_key="facebook-42", failed_at=NOW - 3000, error_class="auth")
        row(conn, "downloaded", finished_at=NOW - 30)
        row(conn, "verified", lease_owner="v:1", lease_expires_at=NOW + 200, verified_at=NOW - 20, updated_at=NOW - 15)
        row(conn, "committed", committed_at=NOW - 1)
        conn.execute(insert(schema.rate_budget).values(platform="bilibili", tokens=0, updated_at=NOW - 100, rate=1.0,
                                                       base_rate=4.0, burst=4, slow_until=NOW + 30, in_flight=0))
    engine = empty_ledger.engine
    binding = platform_signals.binding_budgets(engine, NOW)
    assert set(binding) == {"bilibili"} and binding["bilibili"]["slowed_until"] == NOW + 30
    rows = waiting.waiting(engine, NOW, binding)
    summary = wait_summary.summarize_waiting(rows, NOW)
    assert list(summary) == ["awaiting_run", "worker_slot", "rate_budget", "retry_backoff", "platform_halted",
                             "disk_guard", "uncertain_lease", "operator"], "in waits.REASONS order"
    counts = {reason: {p: e["count"] for p, e in entry["platforms"].items()} for reason, entry in summary.items()}
    assert counts == {
        "awaiting_run": {"urls": 3, "weibo": 1},  # queued, due again, downloaded; the formerly halted row
        "worker_slot": {"urls": 2},  # a download lease, a verify lease
        "rate_budget": {"bilibili": 1},
        "retry_backoff": {"facebook": 1},
        "platform_halted": {"weibo": 1},
        "disk_guard": {"bilibili": 1},
        "uncertain_lease": {"urls": 1},
        "operator": {"facebook": 1},
    }
    ages = {reason: {p: e["oldest_age_s"] for p, e in entry["platforms"].items()} for reason, entry in summary.items()}
    assert ages["awaiting_run"] == {"urls": 100.0, "weibo": 900.0}
    assert ages["worker_slot"] == {"urls": 50.0} and ages["rate_budget"] == {"bilibili": 40.0}
    assert ages["uncertain_lease"] == {"urls": 120.0} and ages["platform_halted"] == {"weibo": 200.0}
    assert ages["operator"] == {"facebook": 3000.0} and ages["disk_guard"] == {"bilibili": 60.0}
    facebook = summary["retry_backoff"]["platforms"]["facebook"]
    assert facebook["retry_after_s_max"] == 30.0 and facebook["causes"] == {"rate_limited": 1}
    assert summary["platform_halted"]["platforms"]["weibo"]["causes"] == {"http_5xx": 1}
    assert sum(entry["count"] for entry in summary.values()) == 12, "every unfinished row, once"

    # What Dagster holds for the partitions splits the ready rows.
    refined = wait_summary.summarize_waiting(wait_summary.refine_with_runs(
        rows, queued_partitions={"2026-11-27|weibo-679"}, running_partitions={"2026-11-27|urls-s"}), NOW)
    assert {p: e["count"] for p, e in refined["run_queued"]["platforms"].items()} == {"weibo": 1}
    assert {p: e["count"] for p, e in refined["step_pending"]["platforms"].items()} == {"urls": 3}
    assert "awaiting_run" not in refined


def test_a_drained_budget_binds_only_while_workers_draw_on_it(empty_ledger):
    with empty_ledger.engine.begin() as conn:
        conn.execute(insert(schema.rate_budget).values(platform="weibo", tokens=0.2, updated_at=NOW - 0.1, rate=2.0,
                                                       base_rate=2.0, burst=4, slow_until=0.0, in_flight=0))
        conn.execute(insert(schema.rate_budget).values(platform="urls", tokens=0.0, updated_at=NOW - 60, rate=0.01,
                                                       base_rate=0.01, burst=1, slow_until=0.0, in_flight=0))
    binding = platform_signals.binding_budgets(empty_ledger.engine, NOW)
    assert set(binding) == {"weibo"} and binding["weibo"]["drained"] and binding["weibo"]["slowed_until"] is None


def test_the_stage_transitions_say_why_a_handed_back_or_retried_item_waits():
    down = CrawlError(ErrorClass.HTTP_5XX, "500")
    assert waits.halted_values(down, now=NOW) == {"wait_reason": "platform_halted", "wait_since": NOW,
                                                  "wait_cause": "http_5xx"}
    assert HandedBack(down, at=NOW).columns()["wait_reason"] == "platform_halted"
    assert HandedBack(CrawlError(ErrorClass.AUTH, "401"), at=NOW).columns()["wait_reason"] == "platform_halted"
    assert HandedBack(CrawlError(ErrorClass.DISK_FULL, "full"), at=NOW).columns()["wait_reason"] == "disk_guard"
    limited = CrawlError(ErrorClass.RATE_LIMITED, "429", retry_after=42.0)
    retried = DownloadFailed(FailedAttempt(limited, attempts=1, retry_at=NOW + 42, failed_at=NOW), validator=None)
    assert retried.columns().items() >= {"wait_reason": "retry_backoff", "wait_since": NOW,
                                         "wait_cause": "rate_limited", "retry_after_s": 42.0}.items()
    gone = CrawlError(ErrorClass.NOT_FOUND, "404")
    assert "wait_reason" not in DownloadFailed(FailedAttempt(gone, attempts=1, retry_at=None), validator=None).columns()


def failures(conn, platform, times, **columns):
    for at in times:
        row(conn, "retry_wait", platform=platform, source_key=f"{platform}-1", failed_at=at, error_class="http_5xx",
            next_attempt_at=NOW + 600, **columns)


def successes(conn, platform, times):
    for at in times:
        row(conn, "committed", platform=platform, source_key=f"{platform}-1", finished_at=at, committed_at=at + 1)


def test_platform_health_from_every_signal(empty_ledger):
    with empty_ledger.engine.begin() as conn:
        # weibo: one success, then nothing but server-side failures and halted items: down.
        successes(conn, "weibo", [NOW - 3000])
        failures(conn, "weibo", [NOW - 2000, NOW - 1900])
        for at in (NOW - 1899, NOW - 1898, NOW - 1897):
            row(conn, "discovered", platform="weibo", source_key="weibo-1", wait_reason="platform_halted",
                wait_since=at, wait_cause="http_5xx", claimed_at=NOW - 2100)
        # bilibili: an hour that went well, then failing: degraded (starting to fail).
        successes(conn, "bilibili", [NOW - 3000 + n for n in range(10)])
        failures(conn, "bilibili", [NOW - 100, NOW - 90, NOW - 80])
        # facebook: mostly failing, but it answers again: ok, the outage ended (a success ends it).
        failures(conn, "facebook", [NOW - 3000, NOW - 2900, NOW - 2800, NOW - 2700])
        successes(conn, "facebook", [NOW - 60])
        # urls: its feed pages fail with 5xx, nothing else happened: down; older failures with no
        # success since are the same outage (the latest signals decide, not a window).
        for at in (NOW - 600, NOW - 500, NOW - 400):
            conn.execute(insert(schema.feed_errors).values(source_key="urls-s", day="2026-11-27", platform="urls",
                                                           error_class="http_5xx", at=at))
        failures(conn, "urls", [NOW - 7200] * 5)
    health = platform_signals.platform_health(empty_ledger.engine, NOW, PLATFORMS)
    weibo, bilibili, facebook, urls = (health[p] for p in ("weibo", "bilibili", "facebook", "urls"))
    assert weibo["status"] == "down" and weibo["outage_since"] == NOW - 2000
    assert weibo["outage_failures_1h"] == 5 and weibo["requests_ok_1h"] == 1 and weibo["failure_ratio_1h"] == round(5 / 6, 3)
    assert bilibili["status"] == "degraded" and bilibili["outage_since"] == NOW - 100
    assert facebook["status"] == "ok" and facebook["outage_since"] is None
    assert facebook["failures_since_last_success"] == 0 and facebook["last_success_at"] == NOW - 60
    assert [(i["state"], i["since"], i["until"], i["failures"]) for i in facebook["incidents"]] == [
        ("down", NOW - 3000, NOW - 60 + 1, 4)]  # until: the success's commit (finished at -60, committed 1 s later)
    assert urls["status"] == "down" and urls["outage_since"] == NOW - 7200 and urls["outage_failures_1h"] == 3
    assert urls["failures_since_last_success"] == 8


def test_auth_outranks_an_outage_and_a_few_failures_among_many_successes_are_ok(empty_ledger):
    with empty_ledger.engine.begin() as conn:
        successes(conn, "urls", [NOW - 500 + n for n in range(20)])
        failures(conn, "urls", [NOW - 10])
        failures(conn, "facebook", [NOW - 30, NOW - 20, NOW - 10])
        row(conn, "failed", platform="facebook", source_key="facebook-1", failed_at=NOW - 5, error_class="auth")
    health = platform_signals.platform_health(empty_ledger.engine, NOW, PLATFORMS)
    assert health["urls"]["status"] == "ok" and health["urls"]["outage_state"] == "ok"
    assert health["facebook"]["outage_state"] == "down" and health["facebook"]["status"] == "auth_failed"


def test_histograms_are_cumulative_and_only_grow_as_items_commit(empty_ledger):
    def committed(conn, *, queued, claimed, started, finished, verified, done, **columns):
        row(conn, "committed", queued_at=NOW + queued, claimed_at=NOW + claimed, started_at=NOW + started,
            finished_at=NOW + finished, verified_at=NOW + verified, committed_at=NOW + done, **columns)

    with empty_ledger.engine.begin() as conn:
        committed(conn, queued=0, claimed=2, started=2.2, finished=5, verified=5.5, done=6)
        # Waited out a backoff recorded after it was queued: that wait is the retry's.
        committed(conn, queued=0, claimed=400, started=400, finished=401, verified=402, done=403,
                  wait_reason="retry_backoff", wait_since=NOW + 100)
        # Halted, then requeued by a new run's discovery: the halt ended there, the wait since is the queue's.
        committed(conn, queued=500, claimed=520, started=521, finished=522, verified=523, done=524,
                  wait_reason="platform_halted", wait_since=NOW + 300)
        row(conn, "retry_wait", failed_at=NOW)  # not committed: not in the histograms
    first = delays.delay_histograms(empty_ledger.engine)
    queue = first["stage"][("urls", "queue")]
    assert queue["count"] == 3 and queue["sum"] == 2 + 400 + 20
    bounds = delays.DELAY_BUCKETS
    assert queue["buckets"] == [sum(1 for d in (2, 400, 20) if d <= b) for b in bounds]
    assert first["wait"][("urls", "retry_backoff")]["sum"] == 300
    assert first["wait"][("urls", "awaiting_run")]["sum"] == 2 + 20
    assert first["wait"][("urls", "worker_slot")] == first["stage"][("urls", "claim")]
    with empty_ledger.engine.begin() as conn:
        committed(conn, queued=0, claimed=9000, started=9001, finished=9002, verified=9003, done=9004)
    second = delays.delay_histograms(empty_ledger.engine)
    for key, entry in first["stage"].items():
        later = second["stage"][key]
        assert later["count"] == entry["count"] + 1
        assert all(b2 >= b1 for b1, b2 in zip(entry["buckets"], later["buckets"])), key
        assert all(a <= b for a, b in zip(later["buckets"], later["buckets"][1:])) and later["buckets"][-1] <= later["count"]


def _drop_wait_columns(url: str) -> None:
    """A ledger as version 2 left it: every table and index, without version 3's columns."""
    engine = create_engine(url)
    with engine.begin() as conn:
        schema.schema_version.create(conn)
        schema.metadata.create_all(conn, tables=[schema.tasks, schema.cursors, schema.feed_errors, schema.rate_budget])
        for name in schema.COLUMNS_SINCE[3]:
            conn.execute(text(f"ALTER TABLE mc_tasks DROP COLUMN {name}"))
        for version in (1, 2):
            conn.execute(schema.schema_version.insert().values(version=version, applied_at=time.time()))
        conn.execute(text("INSERT INTO mc_tasks (platform, item_id, variant, kind, source_key, day, canonical_url, "
                          "media_url, state, attempts) VALUES ('urls', 'old', 'v', 'image', 's', 'd', 'u', 'm', "
                          "'discovered', 0)"))
    engine.dispose()


def test_a_version_2_ledger_gets_the_wait_columns_and_keeps_its_rows(tmp_path, postgres_url_factory):
    for url in (f"sqlite:///{tmp_path / 'v2.db'}", postgres_url_factory()):
        _drop_wait_columns(url)
        engine = create_engine(url)
        try:
            assert migrate(engine) == schema.SCHEMA_VERSION >= 3
            columns = {column["name"] for column in inspect(engine).get_columns("mc_tasks")}
            assert set(schema.COLUMNS_SINCE[3]) <= columns
            with engine.connect() as conn:
                versions = conn.execute(select(schema.schema_version.c.version)).scalars().all()
                assert sorted(versions) == list(range(1, schema.SCHEMA_VERSION + 1))
            assert migrate(engine) == schema.SCHEMA_VERSION  # again: nothing to do
            ledger = Ledger(url)
            assert [task.item_id for task in ledger.tasks()] == ["old"]
            task = ledger.tasks()[0]
            ledger.apply([(task.id, None, HandedBack(CrawlError(ErrorClass.HTTP_5XX, "x"), at=NOW))])
            rows = waiting.waiting(ledger.engine, NOW)
            assert [(r["reason"], r["cause"]) for r in rows] == [("platform_halted", "http_5xx")]
        finally:
            engine.dispose()
            dispose_engines()

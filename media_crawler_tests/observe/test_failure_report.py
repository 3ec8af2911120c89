"""The failure report on hand-made ledgers (SQLite, PostgreSQL): the failing stage from the stage stamps, grouping, samples, windows."""
import pytest
from sqlalchemy import insert

from media_crawler.store.reports.failures import SAMPLE_URLS, failure_report
from media_crawler.store import schema

NOW = 1_800_000_000.0


@pytest.fixture
def ledger(empty_ledger):
    return empty_ledger


def add_task(ledger, n, *, state, error_class, failed_at, platform="urls", claimed=None, finished=None,
             verified=None, run_id="run-a", next_attempt_at=None, message=None):
    with ledger.engine.begin() as conn:
        conn.execute(insert(schema.tasks).values(
            platform=platform, item_id=f"i{n}", variant="file", kind="image", source_key="urls-x", day="2026-11-27",
            canonical_url=f"http://example.org/{n}.jpg?token=s3cr3t{n}", media_url="http://example.org/m.jpg",
            state=state, attempts=1, error_class=error_class, error_message=message or f"failed {n}", run_id=run_id,
            queued_at=failed_at - 10, claimed_at=claimed, started_at=claimed, finished_at=finished,
            verified_at=verified, failed_at=failed_at, next_attempt_at=next_attempt_at, updated_at=failed_at))


def groups(report):
    return {(g.platform, g.stage, g.error_class, g.status): g for g in report.retrying + report.gave_up}


def test_the_failing_stage_is_read_from_the_stage_timestamps(ledger):
    t = NOW - 100
    add_task(ledger, 1, state="retry_wait", error_class="http_5xx", failed_at=t, claimed=t - 5, next_attempt_at=NOW + 60)
    add_task(ledger, 2, state="retry_wait", error_class="corrupt_media", failed_at=t, claimed=t - 5, finished=t - 2)
    add_task(ledger, 3, state="failed", error_class="storage_error", failed_at=t, claimed=t - 5, finished=t - 3,
             verified=t - 1)
    # Verified in an earlier claim, then re-downloaded: a failure now is the download's.
    add_task(ledger, 4, state="retry_wait", error_class="network_timeout", failed_at=t, claimed=t - 5,
             finished=t - 50, verified=t - 40)
    found = groups(failure_report(ledger.engine, now=NOW))
    assert set(found) == {("urls", "download", "http_5xx", "retrying"), ("urls", "verify", "corrupt_media", "retrying"),
                          ("urls", "commit", "storage_error", "gave_up"),
                          ("urls", "download", "network_timeout", "retrying")}
    assert found[("urls", "download", "http_5xx", "retrying")].next_retry_at == NOW + 60


def test_groups_count_and_keep_a_few_scrubbed_urls_and_the_runs(ledger):
    for n in range(6):
        add_task(ledger, n, state="gone" if n % 2 else "failed", error_class="not_found", failed_at=NOW - 60 + n,
                 run_id=f"run-{n % 2}")
    (group,) = failure_report(ledger.engine, now=NOW).gave_up
    assert group.count == 6 and group.states == {"gone": 3, "failed": 3}
    assert (group.first_seen, group.last_seen) == (NOW - 60, NOW - 55)
    assert len(group.canonical_urls) == SAMPLE_URLS and group.canonical_urls[0].startswith("http://example.org/5.jpg")
    assert not any("s3cr3t" in url for url in group.canonical_urls)
    assert group.run_ids == ["run-0", "run-1"] and group.sample_message == "failed 5"


def test_since_and_platform_filter_and_resolved_pages_are_not_failures(ledger):
    add_task(ledger, 1, state="failed", error_class="auth", failed_at=NOW - 7200, platform="facebook")
    add_task(ledger, 2, state="failed", error_class="auth", failed_at=NOW - 60, platform="facebook")
    add_task(ledger, 3, state="gone", error_class="not_found", failed_at=NOW - 60)
    with ledger.engine.begin() as conn:
        for at, resolved in ((NOW - 30, None), (NOW - 20, NOW - 10)):
            conn.execute(insert(schema.feed_errors).values(
                source_key="bilibili-1", day="2026-11-27", platform="bilibili", error_class="rate_limited",
                message="code -412", run_id="run-p", at=at, resolved_at=resolved))
    recent = groups(failure_report(ledger.engine, now=NOW, since=NOW - 3600))
    assert recent[("facebook", "download", "auth", "gave_up")].count == 1
    page = recent[("bilibili", "fetch", "rate_limited", "gave_up")]
    assert page.count == 1 and page.canonical_urls == ["bilibili-1 2026-11-27"] and page.run_ids == ["run-p"]
    only_facebook = failure_report(ledger.engine, now=NOW, platform="facebook")
    assert [g.count for g in only_facebook.gave_up] == [2] and not only_facebook.retrying
    data = failure_report(ledger.engine, now=NOW).as_json()
    assert data["totals"] == {"retrying": 0, "gave_up": 4} and data["since"] is None
    assert data["gave_up"][0]["first_seen"].endswith("Z")


def test_the_text_report_cuts_a_long_reason_in_its_middle_so_the_cause_survives(ledger):
    from media_crawler.commands.failures import WHY_WIDTH, render_text

    reason = ("urls GET http://feed.example.org/" + "a/" * 200 + "feed.json: connection_refused "
              "(ConnectionRefusedError: [Errno 111] Connection refused)")
    add_task(ledger, 1, state="failed", error_class="connection_refused", failed_at=NOW - 60, message=reason)
    [why] = [line.strip() for line in render_text(failure_report(ledger.engine, now=NOW).as_json()).splitlines()
             if line.strip().startswith("why: ")]
    shown = why[len("why: "):]
    assert len(shown) == WHY_WIDTH and " ... " in shown
    assert shown.startswith("urls GET http://feed.example.org/a/")  # what failed
    assert shown.endswith("[Errno 111] Connection refused)")  # and why

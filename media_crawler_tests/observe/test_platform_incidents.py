"""Platform incidents and health on hand-made ledgers (SQLite, PostgreSQL): every kind of failure
the ledger holds starts an incident, every kind of success ends one, and what `status` reports
(state, since, until, the hour's counts, the binding budgets) reads from those rows."""
from __future__ import annotations

from itertools import count

import pytest
from sqlalchemy import insert

from media_crawler.store import schema, waits
from media_crawler.store.reports.platform_incidents import latest_incidents
from media_crawler.store.reports.platform_signals import binding_budgets, health_json, platform_health

T0 = 1_800_000_000.0
_ids = count()


def item(conn, state: str, platform: str = "weibo", **columns) -> None:
    conn.execute(insert(schema.tasks).values(
        platform=platform, item_id=f"i{next(_ids)}", variant="v", kind="image", source_key=f"{platform}-1",
        day="2026-11-27", canonical_url="https://example.org/x", media_url="https://example.org/m", state=state,
        attempts=1, queued_at=T0 - 5000, discovered_at=T0 - 5000, updated_at=T0 - 5000, **columns))


def failed_item(conn, at: float, error_class: str = "http_5xx", platform: str = "weibo") -> None:
    item(conn, "failed", platform, failed_at=at, error_class=error_class)


def halted_item(conn, at: float, cause: str = "http_5xx", platform: str = "weibo") -> None:
    """An item the outage breaker (or an auth halt) handed back: discovered, waiting on its platform."""
    item(conn, "discovered", platform, wait_reason=waits.PLATFORM_HALTED, wait_since=at, wait_cause=cause)


def page_error(conn, at: float, error_class: str, platform: str = "weibo", *, resolved_at: float | None = None,
               item_id: str | None = None) -> None:
    conn.execute(insert(schema.feed_errors).values(
        source_key=f"{platform}-1", day="2026-11-27", platform=platform, error_class=error_class, at=at,
        resolved_at=resolved_at, item_id=item_id))


def committed(conn, at: float, platform: str = "weibo") -> None:
    item(conn, "committed", platform, finished_at=at, committed_at=at, sha256="0" * 64, size=1)


def downloaded(conn, at: float, platform: str = "weibo") -> None:
    item(conn, "downloaded", platform, finished_at=at)


def feed_walked(conn, at: float, platform: str = "weibo") -> None:
    key = f"{platform}-walk-{next(_ids)}"
    conn.execute(insert(schema.sources).values(source_key=key, platform=platform, registered_at=T0 - 9000))
    conn.execute(insert(schema.source_days).values(source_key=key, day="2026-11-27", feed_done_at=at))


def incidents(ledger, platform: str = "weibo") -> dict:
    return {kind: incident.as_dict() for kind, incident in latest_incidents(ledger.engine, (platform,))[platform].items()}


def test_an_auth_failure_of_a_feed_page_lasts_until_a_later_walk_reads_the_page(empty_ledger):
    with empty_ledger.engine.begin() as conn:
        page_error(conn, T0 + 5, "auth", "facebook")
    ongoing = incidents(empty_ledger, "facebook")["auth"]
    assert (ongoing["platform"], ongoing["kind"], ongoing["state"], ongoing["since"], ongoing["until"],
            ongoing["failures"], ongoing["ongoing"]) == ("facebook", "auth", "auth_failed", T0 + 5, None, 1, True)
    facebook = platform_health(empty_ledger.engine, T0 + 10, ("facebook",))["facebook"]
    assert (facebook["status"], facebook["auth_failures"], facebook["auth_failed_since"]) == ("auth_failed", 1, T0 + 5)

    with empty_ledger.engine.begin() as conn:
        conn.execute(schema.feed_errors.update().values(resolved_at=T0 + 30))
    ended = incidents(empty_ledger, "facebook")["auth"]
    assert (ended["since"], ended["until"], ended["ongoing"]) == (T0 + 5, T0 + 30, False)
    facebook = platform_health(empty_ledger.engine, T0 + 40, ("facebook",))["facebook"]
    assert (facebook["status"], facebook["auth_failures"], facebook["auth_failed_since"]) == ("ok", 0, None)
    assert [incident["until"] for incident in facebook["incidents"]] == [T0 + 30]
    assert health_json(facebook)["incidents"][0]["until"] == "2027-01-15T08:00:30.000Z"


@pytest.mark.parametrize("success", [committed, downloaded, feed_walked])
def test_any_success_ends_an_incident_and_the_next_one_starts_after_it(empty_ledger, success):
    """The latest incident: the failures after the success before them, ended by the first success after."""
    with empty_ledger.engine.begin() as conn:
        failed_item(conn, T0 + 1, "auth")
        failed_item(conn, T0 + 2, "auth")
        success(conn, T0 + 10)
        failed_item(conn, T0 + 15, "auth")
        success(conn, T0 + 18)
        failed_item(conn, T0 + 20, "auth")
        failed_item(conn, T0 + 21, "auth")
        success(conn, T0 + 30)
        success(conn, T0 + 40)
    auth = incidents(empty_ledger)["auth"]
    # Began after the latest success before it (T0 + 18, not T0 + 10), ended by the first after it.
    assert (auth["since"], auth["until"], auth["failures"], auth["last_failure_at"]) == (T0 + 20, T0 + 30, 2, T0 + 21)
    with empty_ledger.engine.begin() as conn:
        failed_item(conn, T0 + 50, "auth")
    auth = incidents(empty_ledger)["auth"]
    assert (auth["since"], auth["until"], auth["failures"]) == (T0 + 50, None, 1)


def test_an_outage_needs_three_failures_in_a_row_of_any_server_side_kind(empty_ledger):
    with empty_ledger.engine.begin() as conn:
        failed_item(conn, T0 + 1, "http_5xx")
        page_error(conn, T0 + 2, "network_timeout")
        page_error(conn, T0 + 2.5, "http_5xx", item_id="an item")  # an item's feed error: no platform signal
        conn.execute(insert(schema.sources).values(source_key="weibo-1", platform="weibo", registered_at=T0 - 9000))
        feed_walked(conn, T0 + 2.7, "bilibili")  # another platform's success ends nothing here
    assert "outage" not in incidents(empty_ledger)
    with empty_ledger.engine.begin() as conn:
        halted_item(conn, T0 + 3, "connection_reset")
    outage = incidents(empty_ledger)["outage"]
    assert (outage["state"], outage["since"], outage["failures"], outage["ongoing"]) == ("down", T0 + 1, 3, True)
    weibo = platform_health(empty_ledger.engine, T0 + 10, ("weibo",))["weibo"]
    assert (weibo["status"], weibo["outage_state"], weibo["outage_since"], weibo["failures_since_last_success"]) == (
        "down", "down", T0 + 1, 3)
    assert (weibo["outage_failures_1h"], weibo["requests_ok_1h"], weibo["failure_ratio_1h"]) == (3, 0, 1.0)
    assert weibo["last_failure_at"] == T0 + 3


@pytest.mark.parametrize(("successes_before", "state"), [(3, "down"), (4, "degraded")])
def test_down_when_the_failures_are_at_least_the_hours_successes_before_them(empty_ledger, successes_before, state):
    with empty_ledger.engine.begin() as conn:
        for n in range(successes_before):
            committed(conn, T0 - 100 + n)
        committed(conn, T0 - 3600.5)  # more than an hour before the outage: does not weigh it
        for n in range(3):
            failed_item(conn, T0 + n)
    assert incidents(empty_ledger)["outage"]["state"] == state
    weibo = platform_health(empty_ledger.engine, T0 + 10, ("weibo",))["weibo"]
    assert weibo["status"] == state
    # The hour's counts, shown beside it: the one commit older than the hour is left out.
    assert (weibo["requests_ok_1h"], weibo["outage_failures_1h"]) == (successes_before, 3)
    assert weibo["failure_ratio_1h"] == round(3 / (3 + successes_before), 3)
    assert weibo["last_success_at"] == T0 - 100 + successes_before - 1


def test_an_ended_outage_reads_ok_with_its_last_failure_and_the_hours_counts(empty_ledger):
    with empty_ledger.engine.begin() as conn:
        for n in range(3):
            failed_item(conn, T0 + n)
        page_error(conn, T0 + 5, "http_5xx", resolved_at=T0 + 20)  # a page a later walk read: a success
    weibo = platform_health(empty_ledger.engine, T0 + 30, ("weibo",))["weibo"]
    assert (weibo["status"], weibo["outage_state"], weibo["outage_since"], weibo["failures_since_last_success"]) == (
        "ok", "ok", None, 0)
    assert (weibo["requests_ok_1h"], weibo["outage_failures_1h"], weibo["last_success_at"]) == (1, 4, T0 + 20)
    assert weibo["last_failure_at"] == T0 + 5
    [outage] = weibo["incidents"]
    assert (outage["since"], outage["until"], outage["failures"]) == (T0, T0 + 20, 4)


def test_the_worst_lasting_state_is_the_status(empty_ledger):
    with empty_ledger.engine.begin() as conn:
        for platform in ("weibo", "bilibili"):
            for n in range(3):
                failed_item(conn, T0 + n, platform=platform)
            failed_item(conn, T0 + 5, "rate_limited", platform)
        failed_item(conn, T0 + 6, "auth", "weibo")
        failed_item(conn, T0 + 7, "rate_limited", "urls")
    health = platform_health(empty_ledger.engine, T0 + 10, ("weibo", "bilibili", "urls", "facebook"))
    assert {name: entry["status"] for name, entry in health.items()} == {
        "weibo": "auth_failed", "bilibili": "down", "urls": "rate_limited", "facebook": "ok"}
    assert health["urls"]["rate_limited_errors"] == 1 and health["urls"]["rate_limited_since"] == T0 + 7
    assert [(i["kind"], i["state"]) for i in health["urls"]["incidents"]] == [("rate_limited", "rate_limited")]
    assert health["urls"]["rate_limited"] and not health["facebook"]["rate_limited"]


def test_a_platform_the_caller_did_not_name_is_reported_too(empty_ledger):
    with empty_ledger.engine.begin() as conn:
        failed_item(conn, T0, "auth", "vimeo")
    health = platform_health(empty_ledger.engine, T0 + 10, ("weibo",))
    assert health["vimeo"]["status"] == "auth_failed" and health["weibo"]["status"] == "ok"


def budget(conn, platform: str, *, tokens: float, updated_at: float, slow_until: float, rate: float = 2.5) -> None:
    conn.execute(insert(schema.rate_budget).values(platform=platform, tokens=tokens, updated_at=updated_at, rate=rate,
                                                   base_rate=5.0, burst=10, slow_until=slow_until, in_flight=0))


def test_a_slowed_budget_is_a_rate_limit_while_it_holds_and_a_drained_one_binds_while_drawn_on(empty_ledger):
    now = T0 + 100
    with empty_ledger.engine.begin() as conn:
        budget(conn, "bilibili", tokens=5, updated_at=now - 60, slow_until=now + 50)  # slowed after a 429
        budget(conn, "weibo", tokens=5, updated_at=now - 60, slow_until=now - 1)  # its slow-down is over
        budget(conn, "urls", tokens=0.2, updated_at=now - 0.01, slow_until=0.0)  # drained, being drawn on
        budget(conn, "facebook", tokens=0.2, updated_at=now - 60, slow_until=0.0)  # refilled since
        budget(conn, "vimeo", tokens=0.2, updated_at=now - 60, slow_until=0.0, rate=0.001)  # empty, but idle
        budget(conn, "tiktok", tokens=8, updated_at=now - 0.01, slow_until=0.0)  # drawn on, with tokens left
        budget(conn, "mastodon", tokens=1.5, updated_at=now - 0.01, slow_until=0.0)  # one request's token left
        budget(conn, "twitch", tokens=0, updated_at=now - 0.01, slow_until=now - 0.5)  # drained after a slow-down
    health = platform_health(empty_ledger.engine, now, ("bilibili", "weibo", "urls", "facebook"))
    assert (health["bilibili"]["status"], health["bilibili"]["slowed_until"]) == ("rate_limited", now + 50)
    assert health["bilibili"]["rate_per_s"] == 2.5
    assert (health["weibo"]["status"], health["weibo"]["slowed_until"]) == ("ok", None)
    binding = binding_budgets(empty_ledger.engine, now)
    assert set(binding) == {"bilibili", "urls", "twitch"}
    assert binding["twitch"]["rate_per_s"] == 5.0, "the slow-down is over: back at the base rate"
    assert binding["bilibili"]["slowed_until"] == now + 50 and not binding["bilibili"]["drained"]
    assert binding["urls"]["slowed_until"] is None and binding["urls"]["drained"]
    assert binding["urls"]["rate_per_s"] == 2.5 and binding["urls"]["base_rate_per_s"] == 5.0


def test_a_quiet_platform_reads_zero_everywhere(empty_ledger):
    from media_crawler.store.reports.platform_signals import platform_outage

    quiet = platform_health(empty_ledger.engine, T0, ("weibo",))["weibo"]
    assert quiet == {"status": "ok", "rate_limited": False, "rate_limited_since": None, "rate_limited_errors": 0,
                     "slowed_until": None, "rate_per_s": None, "auth_failures": 0, "auth_failed_since": None,
                     "outage_state": "ok", "outage_since": None, "outage_failures_1h": 0, "requests_ok_1h": 0,
                     "failure_ratio_1h": 0.0, "failures_since_last_success": 0, "last_success_at": None,
                     "last_failure_at": None, "incidents": []}
    with empty_ledger.engine.begin() as conn:
        for n in range(3):
            failed_item(conn, T0 + n)
        committed(conn, T0 + 1, "bilibili")
        # Downloaded more than an hour ago, committed within it: not a download of the hour.
        item(conn, "committed", "bilibili", finished_at=T0 - 4000, committed_at=T0 - 100, sha256="1" * 64, size=1)
    bilibili = platform_health(empty_ledger.engine, T0 + 10, ("bilibili",))["bilibili"]
    assert (bilibili["outage_failures_1h"], bilibili["requests_ok_1h"], bilibili["last_failure_at"]) == (0, 1, None)
    # Asked on its own (the metrics do), the outage reads its incidents itself.
    assert platform_outage(empty_ledger.engine, T0 + 10, ("weibo",))["weibo"]["outage_state"] == "down"

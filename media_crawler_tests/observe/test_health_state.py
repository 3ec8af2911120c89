"""Health is state, not a window: the latest signals decide, a success ends an incident.

The operator's day through the commands an operator types (issue 26's acceptance):
Facebook crawled with its token variable unset fails with `auth` in one line naming
the variable; the variable set, `rerun-failed` succeeds, and at once `status` says
ok (the incident kept, since ... until ...), `health --ready` exits 0, the
platform gauge is 0 and `failures` lists the ended incident; the token expiring
later turns each of them back. An outage (3 server-side failures in a row) and a
rate limit, on ledger rows with their own clock, both ways too. The scrapes of
each phase, replayed through deploy/alerts.yaml with `promtool test rules`, fire
the auth and outage alerts, resolve them after the recovery, and fire them again.
"""
from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field, replace
from itertools import count

import pytest
import requests
import yaml
from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry
from sqlalchemy import insert

from media_crawler import errors
from media_crawler.cli import main
from media_crawler.commands.status import render_text
from media_crawler.config import config_from_dict, load_config
from media_crawler.observe.health import ready
from media_crawler.observe.metrics import LedgerCollector, ledger_registry
from media_crawler.observe.status import build_status
from media_crawler.store import schema
from media_crawler.store.ledger import Ledger
from media_crawler_tests.observe import promtool
from media_crawler_tests.observe.promtool import recorded_series, samples
from media_crawler_tests.observe.support import write_sources

VALID_TOKEN, EXPIRED_TOKEN = "test-token-FAKE9f8e7d6c", "expired"  # the simulator answers Graph 190/463 to `expired`
STATUS = "media_crawler_platform_status"


def command(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(list(args))
    return code, out.getvalue()


@dataclass
class Phase:
    """What the operator sees at one moment: status, the ready probe, the failures report, a scrape."""

    outcome_ok: bool
    status: dict
    status_text: str
    ready_code: int
    ready: dict
    failures_text: str
    failures: dict
    scrape: str
    said: list[str] = field(default_factory=list)  # the command's stderr lines

    def gauge(self, platform: str, state: str) -> float:
        return samples(self.scrape)[(STATUS, (("platform", platform), ("state", state)))]


def observe(config_path, outcome_ok: bool) -> Phase:
    config = load_config(config_path)
    code, text = command("status", "--json", "--no-dagster", "--config", str(config_path))
    assert code == 0
    status = json.loads(text)
    ready_code, ready_text = command("health", "--ready", "--config", str(config_path))
    assert ready_text.count("\n") == 1
    _code, failures_text = command("failures", "--config", str(config_path))
    _code, failures_json = command("failures", "--json", "--config", str(config_path))
    scrape = generate_latest(ledger_registry(Ledger(config.ledger_url).engine, config)).decode()
    return Phase(outcome_ok, status, render_text(status), ready_code, json.loads(ready_text), failures_text,
                 json.loads(failures_json), scrape)


def command_err(*args: str) -> tuple[int, list[str]]:
    """Exit status and stderr lines of a command run in this process (the crawl's report goes there)."""
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        code = main(list(args))
    return code, err.getvalue().splitlines()


@pytest.fixture(scope="module")
def operator_day(tmp_path_factory, simulator):
    """Three phases of one Facebook page, through the CLI and a Dagster home on disk: its
    token variable unset; set, then `rerun-failed`; later the token expired."""
    import shutil

    import media_crawler.defs.assets as assets

    home = tmp_path_factory.mktemp("health_state")
    day = requests.get(f"{simulator.base_url}/_sim/truth", timeout=5).json()["days"][-1]
    config_path = write_sources(home, simulator.base_url, [{"facebook": "page 42"}])
    dagster_home = home / "dagster_home"
    dagster_home.mkdir()
    shutil.copyfile(promtool.REPO / "media_crawler" / "instance" / "dagster.yaml", dagster_home / "dagster.yaml")
    phases, said = {}, {}
    with pytest.MonkeyPatch.context() as patch:
        # Test-speed knobs, not behaviour changes: one try per item and step, step retries at once.
        patch.setattr(assets, "DOWNLOAD_RETRY_WAIT_S", 0.0)
        patch.setattr(errors, "ATTEMPTS", replace(errors.ATTEMPTS, in_step=1))
        patch.delenv("MEDIA_CRAWLER_LEDGER_URL", raising=False)
        patch.setenv("MEDIA_CRAWLER_HOME", str(home))
        patch.setenv("DAGSTER_HOME", str(dagster_home))
        patch.delenv("FB_ACCESS_TOKEN", raising=False)
        crawl_args = ("crawl", "--config", str(config_path), "--day", day, "--workers", "1")
        code, said["unset"] = command_err(*crawl_args)
        phases["unset"] = observe(config_path, code == 0)
        patch.setenv("FB_ACCESS_TOKEN", VALID_TOKEN)
        code, said["renewed"] = command_err("rerun-failed", "--config", str(config_path))
        phases["renewed"] = observe(config_path, code == 0)
        patch.setenv("FB_ACCESS_TOKEN", EXPIRED_TOKEN)
        code, said["expired_again"] = command_err(*crawl_args)
        phases["expired_again"] = observe(config_path, code == 0)
    for name, phase in phases.items():
        phase.said = said[name]
    return phases


NAMED = "FB_ACCESS_TOKEN is not set (platforms.facebook.credential_env.access_token)"


def test_an_unset_token_is_one_line_naming_it_and_an_auth_failure_everywhere(operator_day):
    phase = operator_day["unset"]
    assert not phase.outcome_ok
    # The crawl's report: one line for the failed partition, naming the variable; no trace.
    [failed] = [line for line in phase.said if "FAILED" in line]
    assert NAMED in failed and "auth" in failed, failed
    assert not any("Traceback" in line or "Stack Trace" in line for line in phase.said), phase.said
    assert f"credentials not set: {NAMED}" in phase.status_text
    assert NAMED in phase.ready["reason"] and NAMED in phase.failures_text
    facebook = phase.status["platforms"]["facebook"]
    assert facebook["status"] == "auth_failed" and facebook["auth_failed_since"] and facebook["auth_failures"] >= 1
    assert "auth failed since" in phase.status_text
    assert phase.ready_code == 1 and not phase.ready["ok"]
    assert "platform in auth failure: facebook (since" in phase.ready["reason"]
    assert phase.gauge("facebook", "auth_failed") == 1 and phase.gauge("facebook", "ok") == 0
    [incident] = phase.failures["platform_incidents"]
    assert incident["state"] == "auth_failed" and incident["ongoing"] and incident["until"] is None
    assert "PLATFORM INCIDENTS" in phase.failures_text and "ongoing" in phase.failures_text


def test_a_renewed_token_and_rerun_failed_end_the_incident_at_once(operator_day):
    before, phase = operator_day["unset"], operator_day["renewed"]
    assert phase.outcome_ok, phase.said  # rerun-failed exited 0
    assert any(line.startswith("re-ran ") and ": ok run " in line for line in phase.said), phase.said
    assert "credentials not set" not in phase.status_text and phase.ready["checks"]["credentials"]["ok"]
    facebook = phase.status["platforms"]["facebook"]
    assert facebook["status"] == "ok" and facebook["auth_failures"] == 0 and facebook["auth_failed_since"] is None
    assert phase.ready_code == 0 and phase.ready["ok"], phase.ready
    assert phase.gauge("facebook", "auth_failed") == 0 and phase.gauge("facebook", "ok") == 1
    assert samples(phase.scrape)[("media_crawler_platform_auth_failures", (("platform", "facebook"),))] == 0
    # The incident is kept, with its end: the same start as while it lasted.
    [incident] = phase.failures["platform_incidents"]
    since = before.failures["platform_incidents"][0]["since"]
    assert incident["state"] == "auth_failed" and not incident["ongoing"]
    assert incident["since"] == since and incident["until"] > since
    assert f"was auth_failed since {since} until {incident['until']}" in phase.status_text
    assert f"facebook  auth_failed since {since} until {incident['until']}" in phase.failures_text
    assert phase.failures["totals"] == {"retrying": 0, "gave_up": 0}


def test_the_token_expiring_again_is_a_new_incident(operator_day):
    ended, phase = operator_day["renewed"], operator_day["expired_again"]
    assert not phase.outcome_ok
    facebook = phase.status["platforms"]["facebook"]
    assert facebook["status"] == "auth_failed"
    assert facebook["auth_failed_since"] > ended.failures["platform_incidents"][0]["until"]
    assert phase.ready_code == 1 and "facebook" in phase.ready["reason"]
    assert phase.gauge("facebook", "auth_failed") == 1


# -- an outage and a rate limit, on ledger rows with their own clock -------------------------------

T0 = 1_800_000_000.0
_ids = count()


def item(conn, state: str, platform: str = "weibo", **columns) -> None:
    conn.execute(insert(schema.tasks).values(
        platform=platform, item_id=f"i{next(_ids)}", variant="v", kind="image", source_key=f"{platform}-1",
        day="2026-11-27", canonical_url="https://example.org/x", media_url="https://example.org/m", state=state,
        attempts=1, queued_at=T0 - 1000, discovered_at=T0 - 1000, updated_at=T0 - 1000, **columns))


def server_failures(conn, times: list[float], platform: str = "weibo") -> None:
    for at in times:
        item(conn, "retry_wait", platform, failed_at=at, error_class="http_5xx", next_attempt_at=at + 600)


def success(conn, at: float, platform: str = "weibo") -> None:
    item(conn, "committed", platform, finished_at=at, committed_at=at, sha256="0" * 64, size=1)


@dataclass
class Seen:
    status: dict
    ready: object
    scrape: str


def seen(ledger: Ledger, config, now: float) -> Seen:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LedgerCollector(ledger.engine, config, clock=lambda: now))
    return Seen(build_status(ledger.engine, config, now), ready(ledger.engine, config, now),
                generate_latest(registry).decode())


@pytest.fixture
def world(empty_ledger, tmp_path):
    config = config_from_dict({"store": str(tmp_path / "store"), "ledger_url": empty_ledger.url})
    return empty_ledger, config


def test_an_outage_starts_at_three_failures_in_a_row_ends_at_a_success_and_starts_again(world):
    ledger, config = world
    with ledger.engine.begin() as conn:
        server_failures(conn, [T0 + 1, T0 + 2])
    two = seen(ledger, config, T0 + 10)
    assert two.status["platforms"]["weibo"]["status"] == "ok"  # two in a row: what retries are for
    with ledger.engine.begin() as conn:
        server_failures(conn, [T0 + 3])
    down = seen(ledger, config, T0 + 10)
    weibo = down.status["platforms"]["weibo"]
    assert weibo["status"] == "down" and weibo["failures_since_last_success"] == 3
    assert weibo["outage_since"].startswith("2027-01-15T08:00:01")
    assert down.ready.ok and "weibo down since" in down.ready.reason  # shown, not gating
    assert samples(down.scrape)[(STATUS, (("platform", "weibo"), ("state", "down")))] == 1

    with ledger.engine.begin() as conn:
        success(conn, T0 + 20)
    # Minutes later, well inside any hour: the success decided.
    recovered = seen(ledger, config, T0 + 300)
    weibo = recovered.status["platforms"]["weibo"]
    assert weibo["status"] == "ok" and weibo["outage_since"] is None
    assert [(i["state"], i["since"], i["until"], i["failures"]) for i in weibo["incidents"]] == [
        ("down", down.status["platforms"]["weibo"]["outage_since"], "2027-01-15T08:00:20.000Z", 3)]
    assert "weibo down since" not in recovered.ready.reason
    values = samples(recovered.scrape)
    assert values[(STATUS, (("platform", "weibo"), ("state", "down")))] == 0
    assert values[(STATUS, (("platform", "weibo"), ("state", "ok")))] == 1
    assert ("media_crawler_platform_unhealthy_since_timestamp_seconds", (("platform", "weibo"),)) not in values

    with ledger.engine.begin() as conn:
        server_failures(conn, [T0 + 400, T0 + 401, T0 + 402])
    again = seen(ledger, config, T0 + 410)
    weibo = again.status["platforms"]["weibo"]
    # Three failures after one success: down again (they outnumber the hour's one success before them).
    assert weibo["status"] == "down" and weibo["outage_since"].startswith("2027-01-15T08:06:40")
    assert samples(again.scrape)[(STATUS, (("platform", "weibo"), ("state", "down")))] == 1
    scrapes = {"down": down.scrape, "recovered": recovered.scrape, "again": again.scrape}
    alerts_fire_resolve_and_fire_again(scrapes, "MediaCrawlerPlatformDown", {"platform": "weibo", "state": "down"})


def test_failing_after_an_hour_that_went_well_is_degraded_not_down(world):
    ledger, config = world
    with ledger.engine.begin() as conn:
        for n in range(10):
            success(conn, T0 + n)
        server_failures(conn, [T0 + 100, T0 + 101, T0 + 102])
    weibo = seen(ledger, config, T0 + 200).status["platforms"]["weibo"]
    assert weibo["status"] == "degraded" and weibo["failures_since_last_success"] == 3


def test_rate_limited_while_the_budget_is_slowed_or_no_success_came_since(world):
    ledger, config = world
    with ledger.engine.begin() as conn:
        item(conn, "retry_wait", "bilibili", failed_at=T0, error_class="rate_limited", next_attempt_at=T0 + 60)
        conn.execute(insert(schema.rate_budget).values(platform="bilibili", tokens=0, updated_at=T0, rate=2.5,
                                                       base_rate=5.0, burst=10, slow_until=T0 + 50, in_flight=0))
    limited = seen(ledger, config, T0 + 10).status["platforms"]["bilibili"]
    assert limited["status"] == "rate_limited" and limited["slowed_until"] and limited["rate_limited_errors"] == 1
    # The budget's slow-down is over, but nothing succeeded since the 429: still limited.
    assert seen(ledger, config, T0 + 100).status["platforms"]["bilibili"]["status"] == "rate_limited"
    with ledger.engine.begin() as conn:
        success(conn, T0 + 120, "bilibili")
    after = seen(ledger, config, T0 + 130)
    assert after.status["platforms"]["bilibili"]["status"] == "ok"
    assert samples(after.scrape)[("media_crawler_platform_rate_limited", (("platform", "bilibili"),))] == 0
    with ledger.engine.begin() as conn:
        item(conn, "retry_wait", "bilibili", failed_at=T0 + 140, error_class="rate_limited")
    assert seen(ledger, config, T0 + 150).status["platforms"]["bilibili"]["status"] == "rate_limited"


# -- the shipped alerts --------------------------------------------------------------------------

def alerts_fire_resolve_and_fire_again(scrapes: dict[str, str], alert: str, labels: dict[str, str]) -> None:
    """The three scrapes held for 30 minutes each through deploy/alerts.yaml: `alert` fires in the
    first phase (once its `for` passed), is resolved in the second, fires again in the third."""
    import tempfile
    from pathlib import Path

    rule = {rule["alert"]: rule for rule in promtool.alert_rules()}[alert]
    firing = {**labels, **rule["labels"]}
    expected = [{"exp_labels": firing, "exp_annotations": promtool.render(rule["annotations"], firing)}]
    series = recorded_series(list(scrapes.values()), 30, {STATUS})
    test = {"rule_files": [str(promtool.ALERTS)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series, "alert_rule_test": [
            {"eval_time": "1m", "alertname": alert, "exp_alerts": []},  # not yet for its `for`
            {"eval_time": "25m", "alertname": alert, "exp_alerts": expected},
            {"eval_time": "35m", "alertname": alert, "exp_alerts": []},  # resolved after the recovery
            {"eval_time": "55m", "alertname": alert, "exp_alerts": []},
            {"eval_time": "85m", "alertname": alert, "exp_alerts": expected},
        ]}]}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "health_state_test.yaml"
        path.write_text(yaml.safe_dump(test, sort_keys=False))
        result = promtool.promtool("test", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_auth_alert_fires_resolves_after_the_renewed_token_and_fires_again(operator_day):
    scrapes = {name: phase.scrape for name, phase in operator_day.items()}
    alerts_fire_resolve_and_fire_again(scrapes, "MediaCrawlerPlatformAuthFailed",
                                       {"platform": "facebook", "state": "auth_failed"})



def test_the_outage_threshold_and_classes_are_the_breakers():
    """The store may not import recovery/: the threshold is repeated, and must stay the same."""
    from media_crawler.download import outage
    from media_crawler.store.reports import platform_incidents

    assert platform_incidents.OUTAGE_STREAK == outage.OUTAGE_THRESHOLD
    assert set(platform_incidents.OUTAGE_CLASSES) == {error_class.value for error_class in outage.OUTAGE_CLASSES}

"""deploy/alerts.yaml: `promtool check rules` passes, every alert links a runbook section that
exists, and each rule fires on the series it is about (and not on its near misses), fed
to `promtool test rules` as synthetic series. The outage and recovery of a real crawl
are replayed through the rules in test_outage_drill.py."""
from __future__ import annotations

import yaml

from media_crawler_tests.observe import promtool

RULES = {rule["alert"]: rule for rule in promtool.alert_rules()}


def test_the_rules_pass_promtool_check_rules():
    result = promtool.promtool("check", "rules", str(promtool.ALERTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(RULES)} rules found" in result.stdout


def test_every_alert_says_what_to_do_in_a_runbook_section_that_exists():
    anchors = promtool.runbook_anchors()
    assert len(RULES) >= 10
    for name, rule in RULES.items():
        url = rule["annotations"]["runbook_url"]
        assert url.startswith("docs/RECOVERY.md#"), (name, url)
        assert url.split("#", 1)[1] in anchors, f"{name}: no section {url} in {promtool.RUNBOOK}"
        assert rule["labels"]["severity"] in ("page", "ticket"), name
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], name
    for required in ("MediaCrawlerPlatformDown", "MediaCrawlerUncertainLeaseOld", "MediaCrawlerNoCommits",
                     "MediaCrawlerDiskGuardClose", "MediaCrawlerWaitingForRunTooLong"):
        assert required in RULES
    assert RULES["MediaCrawlerPlatformDown"]["for"] == "15m"


def firing(name: str, labels: dict[str, str], value: float | None = None) -> dict:
    rule = RULES[name]
    every = {**labels, **rule["labels"]}
    return {"exp_labels": every, "exp_annotations": promtool.render(rule["annotations"], every, value)}


def run_rule_tests(tmp_path, tests: list[dict]) -> None:
    path = tmp_path / "alerts_test.yaml"
    path.write_text(yaml.safe_dump({"rule_files": [str(promtool.ALERTS)], "evaluation_interval": "1m",
                                    "tests": tests}, sort_keys=False))
    result = promtool.promtool("test", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_each_rule_fires_on_its_series_and_not_before(tmp_path):
    waiting = "media_crawler_waiting_oldest_age_seconds"
    series = [
        ("media_crawler_ledger_up", "1x10 0x20"),
        ('media_crawler_platform_status{platform="facebook",state="auth_failed"}', "1x30"),
        ("media_crawler_uncertain_oldest_age_seconds", "0+60x30"),
        (f'{waiting}{{platform="weibo",reason="run_queued"}}', "7000+60x30"),
        (f'{waiting}{{platform="bilibili",reason="worker_slot"}}', "3000+60x30"),
        (f'{waiting}{{platform="facebook",reason="retry_backoff"}}', "7000+60x30"),
        (f'{waiting}{{platform="weibo",reason="platform_halted"}}', "21000+60x30"),
        (f'{waiting}{{platform="urls",reason="operator"}}', "86000+60x30"),
        ("media_crawler_store_free_bytes", "1200000000x30"),
        ("media_crawler_store_min_free_bytes", "1000000000x30"),
    ]
    at = 20 * 60
    checks = [
        ("MediaCrawlerLedgerDown", "14m", []),  # down from minute 11, not yet for 5 minutes
        ("MediaCrawlerLedgerDown", "20m", [firing("MediaCrawlerLedgerDown", {})]),
        ("MediaCrawlerPlatformAuthFailed", "10m", [
            firing("MediaCrawlerPlatformAuthFailed", {"platform": "facebook", "state": "auth_failed"})]),
        ("MediaCrawlerUncertainLeaseOld", "18m", []),  # past 15 min of age at 16m, not yet for 5 minutes
        ("MediaCrawlerUncertainLeaseOld", "25m", [firing("MediaCrawlerUncertainLeaseOld", {}, 25 * 60)]),
        ("MediaCrawlerWaitingForRunTooLong", "20m", [firing(
            "MediaCrawlerWaitingForRunTooLong", {"platform": "weibo", "reason": "run_queued"}, 7000 + at)]),
        ("MediaCrawlerWaitingForWorkersTooLong", "12m", []),
        ("MediaCrawlerWaitingForWorkersTooLong", "20m", [firing(
            "MediaCrawlerWaitingForWorkersTooLong", {"platform": "bilibili", "reason": "worker_slot"}, 3000 + at)]),
        ("MediaCrawlerRetryBackoffTooLong", "20m", [firing(
            "MediaCrawlerRetryBackoffTooLong", {"platform": "facebook", "reason": "retry_backoff"}, 7000 + at)]),
        ("MediaCrawlerPlatformHaltedTooLong", "20m", [firing(
            "MediaCrawlerPlatformHaltedTooLong", {"platform": "weibo", "reason": "platform_halted"}, 21000 + at)]),
        ("MediaCrawlerFailedItemsNeedOperator", "20m", [firing(
            "MediaCrawlerFailedItemsNeedOperator", {"platform": "urls", "reason": "operator"}, 86000 + at)]),
        ("MediaCrawlerDiskGuardClose", "8m", []),  # close from the start, not yet for 10 minutes
        ("MediaCrawlerDiskGuardClose", "20m", [firing("MediaCrawlerDiskGuardClose", {}, 1_200_000_000)]),
        ("MediaCrawlerDiskGuardTripped", "20m", []),  # close is not below
        ("MediaCrawlerPlatformDown", "20m", []),
    ]
    stalled = [("media_crawler_last_commit_timestamp_seconds", "0x90"),
               ('media_crawler_waiting_items{platform="weibo",reason="run_queued"}', "5x90"),
               ("media_crawler_store_free_bytes", "900000000x90"), ("media_crawler_store_min_free_bytes", "1000000000x90")]
    only_failed = [("media_crawler_last_commit_timestamp_seconds", "0x90"),
                   ('media_crawler_waiting_items{platform="weibo",reason="operator"}', "5x90")]
    held_by_disk = [('media_crawler_waiting_items{platform="weibo",reason="disk_guard"}', "0x10 3x80")]
    run_rule_tests(tmp_path, [
        {"interval": "1m", "input_series": [{"series": name, "values": values} for name, values in series],
         "alert_rule_test": [{"eval_time": when, "alertname": name, "exp_alerts": alerts}
                             for name, when, alerts in checks]},
        {"interval": "1m", "input_series": [{"series": name, "values": values} for name, values in stalled],
         "alert_rule_test": [
             # Nothing committed since time 0: an hour at minute 60, for 5 more minutes.
             {"eval_time": "50m", "alertname": "MediaCrawlerNoCommits", "exp_alerts": []},
             {"eval_time": "70m", "alertname": "MediaCrawlerNoCommits",
              "exp_alerts": [firing("MediaCrawlerNoCommits", {}, 70 * 60)]},
             {"eval_time": "10m", "alertname": "MediaCrawlerDiskGuardTripped",
              "exp_alerts": [firing("MediaCrawlerDiskGuardTripped", {})]}]},
        {"interval": "1m", "input_series": [{"series": name, "values": values} for name, values in only_failed],
         "alert_rule_test": [
             # Only failed items wait: they need a person, not a stalled crawl's alert.
             {"eval_time": "70m", "alertname": "MediaCrawlerNoCommits", "exp_alerts": []}]},
        {"interval": "1m", "input_series": [{"series": name, "values": values} for name, values in held_by_disk],
         "alert_rule_test": [
             # Items the disk guard handed back: the guard tripped, whatever the disk says now.
             {"eval_time": "11m", "alertname": "MediaCrawlerDiskGuardTripped", "exp_alerts": []},
             {"eval_time": "20m", "alertname": "MediaCrawlerDiskGuardTripped", "exp_alerts": [
                 firing("MediaCrawlerDiskGuardTripped", {"platform": "weibo", "reason": "disk_guard"})]}]},
    ])

"""Outage drill: weibo's media answer 500, facebook's 429 with Retry-After, the URL feed is
healthy, all crawled through Dagster. `status --json` and the metrics attribute every
waiting item to the right reason per platform, mark weibo down since its first failure,
and the healthy platform's items flow; Dagster's run queue and step start delays come
from run storage. The scrapes of the outage and of the recovery, replayed through the
shipped alert rules (`promtool test rules`), fire MediaCrawlerPlatformDown during the
outage and resolve it after; a real Prometheus scrapes the exporter and answers
`histogram_quantile(0.95, ...)` over the stage delay buckets.
"""
from __future__ import annotations

from dataclasses import replace
import json
import math
import shutil
import time
from datetime import datetime

import pytest
import requests
import yaml
from dagster import DagsterInstance
from prometheus_client import generate_latest, start_http_server

from media_crawler import errors
from media_crawler.cli import main
from media_crawler.commands.crawl import crawl
from media_crawler.config import load_config
from media_crawler.observe.metrics import ledger_registry
from media_crawler.observe.status import build_status
from media_crawler.store.ledger import Ledger
from media_crawler_tests.observe import promtool
from media_crawler_tests.observe.promtool import recorded_series, samples
from media_crawler_tests.recovery.support import write_recovery_config

DAY = "2026-11-27"
DOWN, LIMITED, HEALTHY = "weibo-678", "facebook-42", "urls"
SOURCES = [{"weibo": "user 678"}, {"facebook": "page 42"}, {"urls": "{base}/urls/demo.json"}]
RETRY_AFTER_S = 120
INSTANCE_TEMPLATE = promtool.REPO / "media_crawler" / "instance" / "dagster.yaml"


def set_outage(sim, platform: str, status: int) -> None:
    requests.post(f"{sim.base_url}/_sim/faults", params={"platform": platform, "status": status},
                  timeout=5).raise_for_status()


def parse_ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class Drill:
    """What the drill left: the config, the ledger, the Dagster instance, the two scrapes."""

    def __init__(self, **fields) -> None:
        self.__dict__.update(fields)


@pytest.fixture(scope="module")
def drill(tmp_path_factory):
    import media_crawler.defs.assets as assets
    from media_crawler_sim.server import Simulator
    from media_crawler.store.database import dispose_engines

    home = tmp_path_factory.mktemp("drill")
    sim = Simulator(seed=1, port=0).start()
    dagster_home = home / "dagster_home"
    dagster_home.mkdir()
    shutil.copyfile(INSTANCE_TEMPLATE, dagster_home / "dagster.yaml")
    original_dispatch = sim.app.dispatch

    def with_retry_after(request):  # the simulator's outage answers carry no Retry-After: a real 429 does
        response = original_dispatch(request)
        if response.status == 429:
            response.headers.setdefault("Retry-After", str(RETRY_AFTER_S))
        return response

    with pytest.MonkeyPatch.context() as patch, DagsterInstance.from_config(str(dagster_home)) as instance:
        patch.setattr(sim.app, "dispatch", with_retry_after)
        patch.setenv("MEDIA_CRAWLER_HOME", str(home))
        patch.setenv("DAGSTER_HOME", str(dagster_home))  # what `status` and `metrics` read run storage from
        patch.setenv("FB_ACCESS_TOKEN", "test-token-FAKE9f8e7d6c")
        patch.delenv("MEDIA_CRAWLER_LEDGER_URL", raising=False)
        # Test-speed knobs, not behaviour changes: one try per item and step, step retries at once.
        patch.setattr(errors, "ATTEMPTS", replace(errors.ATTEMPTS, in_step=1))
        patch.setattr(assets, "DOWNLOAD_RETRY_WAIT_S", 0.0)
        sources = [{k: v.format(base=sim.base_url) for k, v in source.items()} for source in SOURCES]
        config = load_config(write_recovery_config(home, sim, sources))
        keys = {name: next(s.key for s in config.sources if s.key.startswith(name)) for name in (DOWN, LIMITED, HEALTHY)}
        ledger = Ledger(config.ledger_url)
        try:
            set_outage(sim, "weibo", 500)
            set_outage(sim, "facebook", 429)
            started = time.time()
            outage = crawl(config.path, [DAY], instance=instance)
            outage_ended = time.time()
            outage_scrape = generate_latest(ledger_registry(ledger.engine, config, instance=instance)).decode()
            outage_ledger = {t.id: t for t in ledger.tasks()}
        finally:
            set_outage(sim, "weibo", 0)
            set_outage(sim, "facebook", 0)
        yield Drill(sim=sim, config=config, ledger=ledger, instance=instance, keys=keys, outage=outage,
                    started=started, outage_ended=outage_ended, outage_scrape=outage_scrape,
                    outage_ledger=outage_ledger, home=home, patch=patch)
        dispose_engines()
    sim.stop()


@pytest.fixture(scope="module")
def recovered(drill):
    """The platforms answer again: their partitions are crawled again and drain."""

    again = crawl(drill.config.path, [DAY], [drill.keys[DOWN], drill.keys[LIMITED]], instance=drill.instance)
    drill.recovery = again
    drill.recovery_scrape = generate_latest(ledger_registry(drill.ledger.engine, drill.config,
                                                            instance=drill.instance)).decode()
    return drill


def status_json(capsys, drill) -> dict:
    capsys.readouterr()
    assert main(["status", "--json", "--config", str(drill.config.path)]) == 0
    return json.loads(capsys.readouterr().out)


def by_platform(drill, platform: str) -> list:
    return [t for t in drill.outage_ledger.values() if t.platform == platform]


def test_status_attributes_every_waiting_item_to_its_reason_and_marks_the_failing_platform_down(drill, capsys):
    outcome = {key: p.success for p in drill.outage.partitions for key in p.sources}
    assert outcome == {drill.keys[DOWN]: False, drill.keys[LIMITED]: False, drill.keys[HEALTHY]: True}
    status = status_json(capsys, drill)
    weibo, facebook, urls = (by_platform(drill, p) for p in ("weibo", "facebook", "urls"))
    assert weibo and facebook and urls

    # The healthy platform flowed: every item committed, nothing of it waits, its health is ok.
    assert {t.state for t in urls} == {"committed"}
    assert status["platforms"]["urls"]["status"] == "ok"
    assert status["platforms"]["urls"]["requests_ok_1h"] == len(urls)
    assert all("urls" not in entry["platforms"] for entry in status["waiting"].values())

    # weibo: down since its first failure; the breaker's items wait out a backoff (or are
    # due again), the rest wait for the platform, each attributed once.
    health = status["platforms"]["weibo"]
    assert health["status"] == "down" and health["outage_state"] == "down"
    failed = [t for t in weibo if t.state == "retry_wait"]
    halted = [t for t in weibo if t.state == "discovered"]
    assert len(failed) >= 3 and halted and len(failed) + len(halted) == len(weibo)
    assert drill.started <= parse_ts(health["outage_since"]) <= drill.outage_ended
    assert health["outage_failures_1h"] == len(weibo) and health["requests_ok_1h"] == 0
    waiting = status["waiting"]
    assert waiting["platform_halted"]["platforms"] == {"weibo": {
        "count": len(halted), "causes": {"http_5xx": len(halted)},
        "oldest_age_s": waiting["platform_halted"]["platforms"]["weibo"]["oldest_age_s"],
        "oldest_since": waiting["platform_halted"]["platforms"]["weibo"]["oldest_since"]}}
    weibo_waits = {reason: entry["platforms"]["weibo"]["count"] for reason, entry in waiting.items()
                   if "weibo" in entry["platforms"]}
    assert sum(weibo_waits.values()) == len(weibo)
    assert set(weibo_waits) <= {"platform_halted", "retry_backoff", "awaiting_run"}, weibo_waits

    # facebook: rate limited, every item waits out the server's Retry-After (2 min).
    assert {t.state for t in facebook} == {"retry_wait"}
    assert status["platforms"]["facebook"]["status"] == "rate_limited"
    assert status["platforms"]["facebook"]["slowed_until"] is not None
    backoff = waiting["retry_backoff"]["platforms"]["facebook"]
    assert backoff["count"] == len(facebook) and backoff["retry_after_s_max"] == RETRY_AFTER_S
    assert backoff["causes"] == {"rate_limited": len(facebook)}

    # Dagster's side, read from run storage: three runs, none queued, each step's start delay.
    dagster = status["dagster"]
    assert dagster["available"], dagster
    assert dagster["run_queue_delay_s"]["count"] == 3 and dagster["runs_queued"] == {}
    assert set(dagster["step_start_delay_s"]) == {"fetch", "download", "verify", "commit"}
    assert all(entry["count"] >= 1 and entry["max"] >= 0 for entry in dagster["step_start_delay_s"].values())


def test_health_ready_names_the_platform_that_is_down_without_failing_on_it(drill, capsys):
    capsys.readouterr()
    code = main(["health", "--ready", "--config", str(drill.config.path)])
    answer = json.loads(capsys.readouterr().out)
    assert code == 0 and answer["ok"], answer  # no auth failure: a worker could start, weibo's items wait
    outage = answer["checks"]["platform_outage"]
    assert set(outage["platforms"]) == {"weibo"} and outage["platforms"]["weibo"]["state"] == "down"
    assert drill.started <= parse_ts(outage["platforms"]["weibo"]["since"]) <= drill.outage_ended
    assert "weibo down since" in answer["reason"]


def test_ready_items_split_by_what_dagster_holds_for_their_partition(drill):
    """Once the breaker's items are due again, they wait for a run: `awaiting_run` with none
    requested, `run_queued` once a run of the partition waits in Dagster's queue."""
    from dagster import DagsterRunStatus
    from dagster._core.test_utils import create_run_for_test

    from media_crawler.recovery.dispatch import code_location_repository

    weibo_retry = [t for t in by_platform(drill, "weibo") if t.state == "retry_wait"]
    with drill.ledger.engine.connect() as conn:
        from sqlalchemy import func, select

        from media_crawler.store.schema import tasks as T

        due_at = conn.execute(select(func.max(T.c.next_attempt_at)).where(T.c.platform == "weibo")).scalar_one()
    later = due_at + 1
    status = build_status(drill.ledger.engine, drill.config, later, instance=drill.instance)
    assert status["waiting"]["awaiting_run"]["platforms"]["weibo"]["count"] == len(weibo_retry)
    with code_location_repository(drill.instance) as repository:
        origin = repository.get_full_job("crawl").get_remote_origin()
    run = create_run_for_test(drill.instance, job_name="crawl", status=DagsterRunStatus.QUEUED, remote_job_origin=origin,
                              tags={"dagster/partition": f"{DAY}|{drill.config.layout.shard_of(drill.keys[DOWN])}", "media_crawler/platform": "weibo"})
    try:
        status = build_status(drill.ledger.engine, drill.config, later, instance=drill.instance)
        assert "awaiting_run" not in status["waiting"]
        assert status["waiting"]["run_queued"]["platforms"]["weibo"]["count"] == len(weibo_retry)
        assert status["dagster"]["runs_queued"]["weibo"]["count"] == 1
        scrape = samples(generate_latest(ledger_registry(drill.ledger.engine, drill.config,
                                                         instance=drill.instance)).decode())
        assert scrape[("media_crawler_dagster_runs_queued", (("platform", "weibo"),))] == 1
    finally:
        drill.instance.delete_run(run.run_id)


def test_the_metrics_say_the_same(drill):
    values = samples(drill.outage_scrape)
    halted = [t for t in by_platform(drill, "weibo") if t.state == "discovered"]
    assert values[("media_crawler_waiting_items", (("platform", "weibo"), ("reason", "platform_halted")))] == len(halted)
    assert values[("media_crawler_waiting_items", (("platform", "facebook"), ("reason", "retry_backoff")))] == \
        len(by_platform(drill, "facebook"))
    assert values[("media_crawler_waiting_retry_after_seconds", (("platform", "facebook"),))] == RETRY_AFTER_S
    assert values[("media_crawler_platform_status", (("platform", "weibo"), ("state", "down")))] == 1
    assert values[("media_crawler_platform_status", (("platform", "urls"), ("state", "ok")))] == 1
    assert values[("media_crawler_platform_status", (("platform", "facebook"), ("state", "rate_limited")))] == 1
    since = values[("media_crawler_platform_unhealthy_since_timestamp_seconds", (("platform", "weibo"),))]
    assert drill.started <= since <= drill.outage_ended
    assert values[("media_crawler_platform_failure_ratio", (("platform", "weibo"),))] == 1
    urls = len(by_platform(drill, "urls"))
    assert values[("media_crawler_stage_delay_seconds_count", (("platform", "urls"), ("stage", "commit")))] == urls
    assert values[("media_crawler_wait_seconds_count", (("platform", "urls"), ("reason", "worker_slot")))] == urls
    assert values[("media_crawler_dagster_up", ())] == 1
    assert values[("media_crawler_dagster_run_queue_delay_seconds_count", (("platform", "weibo"),))] == 1
    assert values[("media_crawler_dagster_step_start_delay_seconds_count", (("stage", "download"),))] == 3


def test_after_the_outage_the_backlog_drains_and_the_platform_is_ok(recovered, capsys):
    assert not recovered.recovery.failed, recovered.recovery.failed
    assert recovered.ledger.state_counts() == {"committed": len(recovered.outage_ledger)}
    status = status_json(capsys, recovered)
    assert status["waiting"] == {}
    assert status["platforms"]["weibo"]["status"] == "ok"
    assert status["platforms"]["weibo"]["requests_ok_1h"] == len(by_platform(recovered, "weibo"))
    values = samples(recovered.recovery_scrape)
    assert values[("media_crawler_platform_status", (("platform", "weibo"), ("state", "down")))] == 0
    assert values[("media_crawler_wait_seconds_count", (("platform", "weibo"), ("reason", "platform_halted")))] \
        == len([t for t in by_platform(recovered, "weibo") if t.state == "discovered"])


def test_the_scrapes_of_the_outage_and_the_recovery_pass_promtool_check_metrics(recovered):
    for scrape in (recovered.outage_scrape, recovered.recovery_scrape):
        checked = promtool.check_metrics(scrape)
        assert checked.returncode == 0 and not (checked.stdout + checked.stderr).strip(), checked


def test_the_recorded_outage_fires_platform_down_and_the_recovery_resolves_it(recovered, tmp_path):
    rules = {rule["alert"]: rule for rule in promtool.alert_rules()}
    down = rules["MediaCrawlerPlatformDown"]
    names = {"media_crawler_platform_status", "media_crawler_platform_unhealthy_since_timestamp_seconds",
             "media_crawler_waiting_items", "media_crawler_waiting_oldest_age_seconds", "media_crawler_ledger_up"}
    series = recorded_series([recovered.outage_scrape, recovered.recovery_scrape], 30, names)
    firing = {"platform": "weibo", "state": "down", **down["labels"]}
    test = {
        "rule_files": [str(promtool.ALERTS)],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": [
                # 10 minutes into the outage: down, but not for the 15 minutes the rule wants.
                {"eval_time": "10m", "alertname": "MediaCrawlerPlatformDown", "exp_alerts": []},
                {"eval_time": "20m", "alertname": "MediaCrawlerPlatformDown", "exp_alerts": [{
                    "exp_labels": firing, "exp_annotations": promtool.render(down["annotations"], firing)}]},
                # After the recovery (from minute 30 on): resolved.
                {"eval_time": "45m", "alertname": "MediaCrawlerPlatformDown", "exp_alerts": []},
            ],
        }],
    }
    path = tmp_path / "outage_test.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    result = promtool.promtool("test", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_real_prometheus_scrapes_the_exporter_and_answers_histogram_quantile(recovered, tmp_path):
    registry = ledger_registry(recovered.ledger.engine, recovered.config)
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        target = f"127.0.0.1:{server.server_port}"
        with promtool.prometheus([target], tmp_path / "prometheus") as prom:
            assert prom.wait_for('up{job="media_crawler"} == 1'), "prometheus never scraped the exporter"
            expression = "histogram_quantile(0.95, sum by (le, stage) (media_crawler_stage_delay_seconds_bucket))"
            result = prom.wait_for(expression)
            by_stage = {item["metric"]["stage"]: float(item["value"][1]) for item in result}
            assert set(by_stage) == {"queue", "claim", "execution", "verify", "commit"}, result
            assert all(math.isfinite(value) and value >= 0 for value in by_stage.values()), by_stage
            waits = prom.wait_for('histogram_quantile(0.95, sum by (le, reason) (media_crawler_wait_seconds_bucket))')
            assert {item["metric"]["reason"] for item in waits} >= {"platform_halted", "worker_slot"}, waits
            rules = prom.query('count(ALERTS) or vector(0)')  # the shipped rules load in a real server too
            assert rules is not None
    finally:
        server.shutdown()
        thread.join(timeout=5)


def test_run_storage_read_with_sql_says_what_the_dagster_instance_says(recovered):
    """`status` and `metrics` read DAGSTER_HOME's run storage with SQL (no Dagster import):
    the same queued runs, run queue and step start delays as through the DagsterInstance."""
    from dagster import DagsterRunStatus
    from dagster._core.test_utils import create_run_for_test

    from media_crawler.observe import dagster_runs
    from media_crawler.recovery.dispatch import code_location_repository

    sql, why_not = dagster_runs.instance_from_environment()
    assert why_not is None and isinstance(sql, dagster_runs.SqlRunStorage)
    api = dagster_runs.ApiRunStorage(recovered.instance)
    with code_location_repository(recovered.instance) as repository:
        origin = repository.get_full_job("crawl").get_remote_origin()
    queued = create_run_for_test(recovered.instance, job_name="crawl", status=DagsterRunStatus.QUEUED,
                                 remote_job_origin=origin,
                                 tags={"dagster/partition": f"{DAY}|weibo-s00", "media_crawler/platform": "weibo"})
    try:
        now = time.time()
        assert api.runs(limit=100) == sql.runs(limit=100)
        assert dagster_runs.runs_in_flight(sql) == dagster_runs.runs_in_flight(api)
        by_sql, by_api = dagster_runs.dagster_status(sql, now), dagster_runs.dagster_status(api, now)
        assert by_sql == by_api
        assert by_sql["runs_queued"]["weibo"]["count"] == 1 and by_sql["step_start_delay_s"]["download"]["count"] > 0
        histograms = []
        for storage in (sql, api):
            delays = dagster_runs.RunDelayHistograms(storage, clock=lambda: now)
            delays.update(now)
            histograms.append({kind: {key: (h.buckets, h.sum, h.count) for key, h in getattr(delays, kind).items()}
                               for kind in ("queue", "steps")})
        assert histograms[0] == histograms[1] and histograms[0]["steps"]
    finally:
        recovered.instance.delete_run(queued.run_id)
        sql.dispose()

"""Failures no retry can fix end the step at once, saying why (issue 26, items 2 and 6).

A credential that sources.yaml names but the environment lacks fails the run before
its first request, as `auth`, naming the variable, in the crawl's line, `failures`,
`status` and `health --ready`; a configuration error is not retried by Dagster's
RetryPolicy; setting the variable and re-running finishes the partition.
"""
from __future__ import annotations

import json

import pytest
import requests
from dagster import DagsterEventType, DagsterInstance, Failure, materialize

from media_crawler.cli import main
from media_crawler.commands.crawl import crawl
from media_crawler.config import ConfigError
from media_crawler.defs.assets import build_crawl_assets
from media_crawler.defs.failing import failing_at_once
from media_crawler.defs.partitions import partition_key
from media_crawler.defs.resources import crawl_resources
from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.shards import PartitionLayout
from media_crawler_tests.conftest import write_config

NAMED = "FB_ACCESS_TOKEN is not set (platforms.facebook.credential_env.access_token)"


def _step_events(instance, run_id: str, event_type: DagsterEventType) -> list[str]:
    records = instance.all_logs(run_id, of_type=event_type)
    return [record.step_key for record in records]


def _facebook_requests(simulator) -> int:
    return simulator.app.stats.snapshot(per_path=False)["requests"].get("/facebook", 0)


def test_an_unset_credential_fails_the_run_at_once_naming_the_variable(crawl_home, simulator, monkeypatch, capsys):
    config = write_config(crawl_home, simulator, [{"facebook": "page 42"}])
    day = requests.get(f"{simulator.base_url}/_sim/truth", timeout=5).json()["days"][0]
    monkeypatch.delenv("FB_ACCESS_TOKEN")
    instance = DagsterInstance.ephemeral()
    asked_before = _facebook_requests(simulator)

    outcome = crawl(config, [day], instance=instance)

    (partition,) = outcome.partitions
    assert not partition.success
    assert f"auth: {NAMED}" in partition.error
    assert _facebook_requests(simulator) == asked_before  # failed before any request
    # One attempt: no step retry, nothing after the first step.
    assert _step_events(instance, partition.run_id, DagsterEventType.STEP_START) == ["media_records"]
    assert _step_events(instance, partition.run_id, DagsterEventType.STEP_UP_FOR_RETRY) == []

    capsys.readouterr()
    assert main(["failures", "--config", str(config), "--json"]) == 0
    failures = capsys.readouterr().out
    assert NAMED in failures and '"auth"' in failures
    assert main(["status", "--config", str(config), "--no-dagster"]) == 0
    status = capsys.readouterr().out
    assert f"credentials not set: {NAMED}" in status and "auth_failed" in status
    assert main(["health", "--ready", "--config", str(config)]) == 1
    probe = json.loads(capsys.readouterr().out)
    assert probe["checks"]["credentials"] == {**probe["checks"]["credentials"], "ok": False, "detail": NAMED}
    assert f"credential not set: {NAMED}" in probe["reason"]

    monkeypatch.setenv("FB_ACCESS_TOKEN", "test-token-FAKE9f8e7d6c")
    rerun = crawl(config, [day], instance=instance)
    assert [p.success for p in rerun.partitions] == [True]
    capsys.readouterr()  # the crawl's JSON lines
    # Whether the platform's auth incident has ended is health's own question (item 1); the variable is set.
    assert main(["health", "--ready", "--config", str(config)]) in (0, 1)
    probe = json.loads(capsys.readouterr().out)
    assert probe["checks"]["credentials"]["ok"] is True
    assert "test-token-FAKE9f8e7d6c" not in failures + status + json.dumps(probe)


def test_a_configuration_error_fails_the_step_once_without_retries(tmp_path):
    instance = DagsterInstance.ephemeral()
    missing = tmp_path / "absent" / "sources.yaml"
    result = materialize(list(build_crawl_assets(PartitionLayout())), instance=instance,
                         partition_key=partition_key("bilibili-s01", "2026-11-25"),
                         resources=crawl_resources(str(missing)), raise_on_error=False)
    assert not result.success
    assert _step_events(instance, result.run_id, DagsterEventType.STEP_START) == ["media_records"]
    assert _step_events(instance, result.run_id, DagsterEventType.STEP_UP_FOR_RETRY) == []
    (failure,) = [event for event in result.all_events if event.is_step_failure]
    assert f"config_error: no sources file at {missing}" in failure.step_failure_data.error.message


@pytest.mark.parametrize("error", [ConfigError("platforms.x is wrong"), CrawlError(ErrorClass.AUTH, "token refused"),
                                   CrawlError(ErrorClass.PARSE_ERROR, "drift"),
                                   CrawlError(ErrorClass.DISALLOWED_URL, "refused")])
def test_final_classes_become_failures_that_dagster_does_not_retry(error):
    with pytest.raises(Failure) as raised, failing_at_once():
        raise error
    assert raised.value.allow_retries is False


def test_retryable_classes_keep_dagsters_retry_policy():
    error = CrawlError(ErrorClass.HTTP_5XX, "503")
    with pytest.raises(CrawlError) as raised, failing_at_once():
        raise error
    assert raised.value is error

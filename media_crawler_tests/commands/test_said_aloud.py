"""What a crawl and its reports say is true and complete: an empty day is named per source, empty
shards are done (not missing), today is partial, every report names the home it read (the one
`crawl` wrote, DAGSTER_HOME unset), backup keeps the run history, and no stack trace is printed."""
from __future__ import annotations

import json
import logging
from datetime import date
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance

from media_crawler.cli import main as cli_main
from media_crawler.commands.crawl import CrawlOutcome, outcome_lines
from media_crawler.commands.empty_shards import empty_shards
from media_crawler.commands.partition_runs import PartitionOutcome
from media_crawler.config import load_config
from media_crawler.observe.logging import JsonFormatter
from media_crawler_sim.content.bilibili import BROKEN_FEED_MID
from media_crawler_sim.server import content_days_note
from media_crawler_tests.recovery.support import write_recovery_config

EMPTY_DAY = "2026-11-20"  # the simulator's demo world publishes on 2026-11-25 to 2026-11-27 only
SOURCE = {"bilibili": "user 12345"}
FEW_SHARDS = {"shards": 2}  # 8 shards in all: Dagster records each empty one's partitions one by one (~70 ms each)


@pytest.fixture
def no_dagster_home(monkeypatch):
    """DAGSTER_HOME unset, and unset again after the test (crawl sets it for its own process)."""
    monkeypatch.setenv("DAGSTER_HOME", "unset-by-this-fixture")
    monkeypatch.delenv("DAGSTER_HOME")


def test_a_day_with_nothing_published_is_said_per_source_and_empty_shards_are_done(
        crawl_home, simulator, no_dagster_home, capfd):
    config_path = write_recovery_config(crawl_home, simulator, sources=[SOURCE], partitions=FEW_SHARDS)
    assert cli_main(["crawl", "--config", str(config_path), "--day", EMPTY_DAY]) == 0
    err = capfd.readouterr().err
    assert f"nothing published on {EMPTY_DAY} by 1 of 1 source(s): bilibili-12345" in err
    config = load_config(config_path)
    with DagsterInstance.from_config(str(crawl_home / "dagster_home")) as instance:
        done = instance.get_materialized_partitions(AssetKey("committed_media"))
    shards = empty_shards(config)
    assert len(shards) == len(config.layout.shard_keys()) - 1 == 7
    assert {f"{EMPTY_DAY}|{shard}" for shard in shards} <= done
    assert f"{EMPTY_DAY}|{config.layout.shard_of(config.sources[0])}" in done  # crawled: its run succeeded


def test_reports_read_the_home_crawl_wrote_and_say_which(crawl_home, simulator, no_dagster_home, monkeypatch, capfd,
                                                         tmp_path):
    config_path = write_recovery_config(crawl_home, simulator, sources=[SOURCE], partitions=FEW_SHARDS)
    assert cli_main(["crawl", "--config", str(config_path), "--day", "2026-11-27"]) == 0
    monkeypatch.delenv("DAGSTER_HOME")  # a new shell: only MEDIA_CRAWLER_HOME, as after `make demo`
    capfd.readouterr()
    dagster_home = crawl_home.resolve() / "dagster_home"

    assert cli_main(["status", "--config", str(config_path), "--json"]) == 0
    status = json.loads(capfd.readouterr().out)
    assert status["dagster"]["available"], status["dagster"]
    assert status["read_from"]["dagster_home"] == str(dagster_home)
    assert "DAGSTER_HOME unset" in status["read_from"]["dagster_home_from"]
    assert str(dagster_home / "history") in status["read_from"]["dagster_storage"]

    assert cli_main(["status", "--config", str(config_path)]) == 0
    text = capfd.readouterr().out
    assert f"Dagster home {dagster_home}" in text and "dagster: not read" not in text

    assert cli_main(["failures", "--config", str(config_path)]) == 0
    assert f"Dagster home {dagster_home}" in capfd.readouterr().err

    assert cli_main(["metrics", "--once", "--config", str(config_path)]) == 0
    assert f"Dagster home {dagster_home}" in capfd.readouterr().err

    backup_dir = tmp_path / "backup"
    assert cli_main(["backup", "--to", str(backup_dir), "--config", str(config_path)]) == 0
    assert f"Dagster home {dagster_home}" in capfd.readouterr().err
    from media_crawler.recovery.backup import BackupManifest, files_folder

    files = files_folder(backup_dir, BackupManifest.read(backup_dir))
    assert (files / "dagster_home" / "history" / "runs.db").is_file()  # the run history is in the backup


def test_a_failed_partition_is_one_line_without_a_stack_trace(crawl_home, simulator, no_dagster_home, capfd):
    config_path = write_recovery_config(crawl_home, simulator, sources=[{"bilibili": f"user {BROKEN_FEED_MID}"}],
                                        partitions=FEW_SHARDS)
    assert cli_main(["crawl", "--config", str(config_path), "--day", "2026-11-27"]) == 1
    out, err = capfd.readouterr()
    assert "Stack Trace" not in out and "Stack Trace" not in err and "Traceback" not in err
    failed = [line for line in err.splitlines() if "FAILED" in line]
    assert len(failed) == 1 and "parse_error" in failed[0] and "dagster._core" not in failed[0], err
    run_id = failed[0].split(" run ")[1].split()[0]
    with DagsterInstance.from_config(str(crawl_home / "dagster_home")) as instance:
        failures = [entry.dagster_event for entry in instance.all_logs(run_id)
                    if entry.dagster_event is not None and entry.dagster_event.is_step_failure]
    assert failures and failures[0].step_failure_data.error.stack  # the trace stays in Dagster's event log


def test_json_log_lines_keep_the_trace_only_under_debug(monkeypatch):
    try:
        raise ValueError("the cause")
    except ValueError:
        import sys

        record = logging.LogRecord("dagster", logging.ERROR, __file__, 1,
                                   "step failed: Failure: x\n\nStack Trace:\n  File \"a.py\", line 1", None,
                                   sys.exc_info())
    monkeypatch.delenv("MEDIA_CRAWLER_DEBUG", raising=False)
    line = json.loads(JsonFormatter().format(record))
    assert line["msg"] == "step failed: Failure: x" and line["exc"] == "ValueError: the cause"
    monkeypatch.setenv("MEDIA_CRAWLER_DEBUG", "1")
    line = json.loads(JsonFormatter().format(record))
    assert "Stack Trace:" in line["msg"] and "Traceback" in line["exc"]


def test_today_and_an_empty_selection_are_said():
    outcome = CrawlOutcome([PartitionOutcome("bilibili-s00", "2026-12-03", True, "r1", sources=("bilibili-1",),
                                             empty_sources=("bilibili-1",))], partial_days=["2026-12-03"])
    lines = outcome_lines(outcome)
    assert any("the day is not over" in line for line in lines)
    assert any("nothing published on 2026-12-03 by 1 of 1 source(s): bilibili-1" in line for line in lines)
    assert any("no configured source" in line for line in outcome_lines(CrawlOutcome()))


def test_sim_says_which_days_hold_content_and_how_to_write_its_sources():
    note = content_days_note(date(2026, 11, 27), 3, "http://127.0.0.1:8000", None)
    assert "2026-11-25 to 2026-11-27" in note and "--print-sources" in note and "--port 8000" in note
    assert "other days hold nothing" in note
    assert "sources.yaml is /x/s.yaml" in content_days_note(date(2026, 11, 27), 1, "http://127.0.0.1:8000",
                                                            "/x/s.yaml")

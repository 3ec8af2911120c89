"""Every bad `crawl` argument (day, shard, source, worker count) is one JSON line on stderr, exit 2,
classified `usage_error` and naming what a good value looks like, before any work starts."""
from __future__ import annotations

import json
from datetime import date, timedelta

import pytest
import yaml

from media_crawler.cli import main as cli_main
from media_crawler.commands.selection import UsageError, check_days, utc_today
from media_crawler.config import config_from_dict, load_config

START_DAY = "2026-11-01"


@pytest.fixture
def two_shard_config(tmp_path, monkeypatch):
    """One Bilibili source in a layout of two Bilibili shards: the other shard holds nothing."""
    home = tmp_path / "home"
    monkeypatch.setenv("MEDIA_CRAWLER_HOME", str(home))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    path = tmp_path / "sources.yaml"
    path.write_text(yaml.safe_dump({
        "sources": [{"bilibili": "user 100000000"}],
        "partitions": {"start_day": START_DAY, "shards": {"bilibili": 2}},
        "store": str(home / "store"), "ledger_url": f"sqlite:///{home / 'ledger.db'}"}))
    return path


def empty_shard(path) -> str:
    config = load_config(path)
    holding = config.layout.shard_of(config.sources[0])
    return next(key for key in config.layout.shard_keys() if key.startswith("bilibili-") and key != holding)


def refused(capsys, path, *args: str) -> dict:
    code = cli_main(["crawl", "--config", str(path), *args])
    err_lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2, err_lines
    assert len(err_lines) == 1, err_lines
    line = json.loads(err_lines[0])
    assert line["event"] == "command_failed" and line["command"] == "crawl"
    assert line["error_class"] == "usage_error", line
    return line


def test_a_month_13_is_refused_with_the_format(capsys, two_shard_config):
    assert "YYYY-MM-DD" in refused(capsys, two_shard_config, "--day", "2026-13-01")["message"]


def test_a_word_for_a_day_is_refused_with_the_format(capsys, two_shard_config):
    assert "YYYY-MM-DD" in refused(capsys, two_shard_config, "--day", "yesterday")["message"]


def test_a_future_day_is_refused(capsys, two_shard_config):
    future = (utc_today() + timedelta(days=2)).isoformat()
    assert "future" in refused(capsys, two_shard_config, "--day", future)["message"]


def test_a_day_before_start_day_is_refused_naming_it(capsys, two_shard_config):
    message = refused(capsys, two_shard_config, "--day", "2026-10-31")["message"]
    assert "start_day" in message and START_DAY in message


def test_an_unknown_source_is_refused_with_the_key_format(capsys, two_shard_config):
    message = refused(capsys, two_shard_config, "--source", "nonsense")["message"]
    assert "bilibili-100000000" in message and "media-crawler sources" in message


def test_a_shard_past_the_layout_is_refused_naming_the_range(capsys, two_shard_config):
    message = refused(capsys, two_shard_config, "--shard", "bilibili-s07")["message"]
    assert "bilibili-s00 to bilibili-s01" in message


def test_a_shard_holding_no_source_is_refused(capsys, two_shard_config):
    message = refused(capsys, two_shard_config, "--shard", empty_shard(two_shard_config))["message"]
    assert "holds no configured source" in message


def test_zero_workers_is_refused(capsys, two_shard_config):
    assert "--workers" in refused(capsys, two_shard_config, "--day", "2026-11-27", "--workers", "0")["message"]


def test_zero_days_is_refused(capsys, two_shard_config):
    assert "--days" in refused(capsys, two_shard_config, "--days", "0")["message"]


def test_nothing_was_started_for_a_refused_argument(capsys, two_shard_config, tmp_path):
    refused(capsys, two_shard_config, "--day", "yesterday")
    assert not (tmp_path / "home" / "dagster_home").exists() and not (tmp_path / "home" / "ledger.db").exists()


def test_today_is_accepted_and_marked_partial():
    config = config_from_dict({"sources": []})
    today = date(2026, 12, 3)
    selection = check_days(["2026-12-02", "2026-12-03"], 1, config, today=today)
    assert selection.days == ["2026-12-02", "2026-12-03"] and selection.partial == ["2026-12-03"]
    assert check_days([], 2, config, today=today).days == ["2026-12-01", "2026-12-02"]
    with pytest.raises(UsageError):
        check_days(["2026-12-04"], 1, config, today=today)


def test_sources_lists_keys_shards_and_platforms(capsys, two_shard_config):
    assert cli_main(["sources", "--config", str(two_shard_config), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    config = load_config(two_shard_config)
    assert rows == [{"key": "bilibili-100000000", "shard": config.layout.shard_of(config.sources[0]),
                     "platform": "bilibili", "source": "user 100000000"}]

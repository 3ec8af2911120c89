"""Shard partitions: bounded counts, stable membership, a failing source named, reshard and upgrade download nothing."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
import yaml
from dagster import AssetKey, DagsterInstance

from media_crawler.cli import main as cli_main
from media_crawler.commands.crawl import crawl
from media_crawler.config import config_from_dict, load_config
from media_crawler.defs.partitions import crawl_partitions
from media_crawler.platforms.registry import parse_source
from media_crawler.pipeline.layout import LayoutError
from media_crawler.shards import DEFAULT_START_DAY, PartitionLayout
from media_crawler_sim.content.bilibili import BROKEN_FEED_MID
from media_crawler.store.ledger import Ledger
from media_crawler_tests.recovery.support import media_requests, write_recovery_config

DAY = "2026-11-27"
RECOMMENDED_MAX = 100_000  # Dagster's recommended ceiling of partitions per asset


@pytest.fixture
def instance():
    with DagsterInstance.ephemeral() as inst:
        yield inst


def ten_thousand_sources() -> list[dict]:
    platforms = ("bilibili", "weibo", "facebook")
    return [{platforms[n % 3]: f"user {100000 + n}" if n % 3 != 2 else f"page {100000 + n}"} for n in range(10_000)]


def test_ten_thousand_sources_over_three_years_stay_under_the_recommended_partition_count():
    config = config_from_dict({"sources": ten_thousand_sources()})
    assert len(config.sources) == 10_000
    partitions = crawl_partitions(config.layout)
    three_years_on = datetime.combine(DEFAULT_START_DAY, datetime.min.time(), tzinfo=timezone.utc) + timedelta(days=3 * 365)
    count = len(partitions.get_partition_keys(current_time=three_years_on))
    assert count <= RECOMMENDED_MAX, count
    # The count does not depend on how many sources there are: a source is no dimension.
    assert count == len(crawl_partitions(config_from_dict({"sources": []}).layout)
                        .get_partition_keys(current_time=three_years_on))
    # The definitions the code location loads use the same partitions.
    from media_crawler.definitions import build_definitions

    defs = build_definitions(config.layout)
    asset = defs.resolve_assets_def(AssetKey("media_records"))
    assert len(asset.partitions_def.get_partition_keys(current_time=three_years_on)) == count


def test_the_start_day_is_the_operators_and_shards_are_counted_per_platform():
    layout = config_from_dict({"partitions": {"start_day": "2026-11-25", "shards": {"bilibili": 4}}}).layout
    keys = crawl_partitions(layout).get_partition_keys(current_time=datetime(2026, 11, 28, tzinfo=timezone.utc))
    days = sorted({key.keys_by_dimension["day"] for key in keys})
    assert days == ["2026-11-25", "2026-11-26", "2026-11-27", "2026-11-28"]  # today too (end_offset=1)
    assert len([k for k in layout.shard_keys() if k.startswith("bilibili-")]) == 4
    assert len([k for k in layout.shard_keys() if k.startswith("weibo-")]) == 16


@pytest.mark.parametrize("raw, reason", [
    ({"shards": 0}, "from 1 to"), ({"shards": "many"}, "whole number"), ({"shards": {"myspace": 2}}, "unknown platform"),
    ({"start_day": "yesterday"}, "start_day"), ({"start": "2026-01-01"}, "unknown key"), ("16", "mapping"),
    ({"shards_per_run": 0}, "shards_per_run must be a whole number from 1 to 64, not 0"),
    ({"shards_per_run": "4"}, "shards_per_run must be a whole number"), ({"shards_per_run": True}, "shards_per_run"),
])
def test_a_bad_partitions_section_is_refused_in_one_line(raw, reason):
    from media_crawler.config import ConfigError

    with pytest.raises(ConfigError, match=reason):
        config_from_dict({"partitions": raw})


def test_adding_a_source_never_moves_another_one():
    layout = PartitionLayout()
    sources = [parse_source("weibo", f"user {n}") for n in range(2_000)]
    before = {source.key: layout.shard_of(source) for source in sources}
    added = [*sources, *(parse_source("weibo", f"user {n}") for n in range(5_000, 6_000))]
    after = {source.key: layout.shard_of(source) for source in added}
    assert all(after[key] == shard for key, shard in before.items())
    assert len(set(before.values())) == 16, "the sources spread over every shard"


def test_a_failing_source_is_named_in_its_partitions_metadata_and_in_failures(crawl_home, simulator, instance, capsys):
    sources = [{"bilibili": "user 12345"}, {"bilibili": f"user {BROKEN_FEED_MID}"}]
    path = write_recovery_config(crawl_home, simulator, sources, partitions={"shards": 1})
    config = load_config(path)
    broken = f"bilibili-{BROKEN_FEED_MID}"
    outcome = crawl(path, [DAY], instance=instance)
    [partition] = outcome.partitions
    assert partition.shard == "bilibili-s00" and set(partition.sources) == {"bilibili-12345", broken}
    assert not partition.success, "a partition with a failed feed is not a success"
    assert broken in partition.error, partition.error

    records = instance.fetch_materializations(AssetKey("media_records"), limit=10).records
    [record] = [r for r in records if r.run_id == partition.run_id]
    metadata = record.asset_materialization.metadata
    assert metadata["sources"].value == 2 and metadata["sources_failed"].value == 1
    [row] = metadata["failed_sources"].value.records
    assert row.data["source"] == broken and row.data["error_class"] and row.data["since"].endswith("Z")
    # The healthy source of the same shard was downloaded and committed all the same.
    ledger = Ledger(config.ledger_url)
    good = ledger.state_counts(source_key="bilibili-12345", day=DAY)
    assert good and set(good) == {"committed"}, good

    capsys.readouterr()
    assert cli_main(["failures", "--config", str(path)]) in (0, 1)
    assert broken in capsys.readouterr().out


def test_a_reshard_downloads_nothing(crawl_home, simulator, instance, capsys, tmp_path, monkeypatch):
    sources = [{"bilibili": "user 12345"}, {"weibo": "user 678"}, {"weibo": "user 679", "api": "ajax"},
               {"facebook": "page 42"}]
    path = write_recovery_config(crawl_home, simulator, sources)
    first = crawl(path, [DAY], instance=instance)
    assert not first.failed, first.failed
    ledger = Ledger(load_config(path).ledger_url)
    committed = ledger.state_counts()
    downloads = media_requests(simulator)

    data = yaml.safe_load(path.read_text())
    data["partitions"] = {"shards": 1}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(LayoutError, match="media-crawler reshard"):
        crawl(path, [DAY], instance=instance)
    capsys.readouterr()
    (tmp_path / "dagster_home").mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    assert cli_main(["crawl", "--config", str(path), "--day", DAY]) == 2, "refused as a configuration matter"
    refusal = capsys.readouterr().err.strip().splitlines()
    assert len(refusal) == 1 and "reshard" in refusal[0] and "Traceback" not in refusal[0]

    from media_crawler.commands import reshard

    class Args:
        config, dry_run = str(path), True

    assert reshard.run(Args(), instance=instance) == 0
    assert "would reshard" in capsys.readouterr().out
    Args.dry_run = False
    assert reshard.run(Args(), instance=instance) == 0
    assert "nothing was downloaded" in capsys.readouterr().out
    again = crawl(path, [DAY], instance=instance)
    assert not again.failed and {p.shard for p in again.partitions} == {"bilibili-s00", "weibo-s00", "facebook-s00"}
    assert media_requests(simulator) == downloads, "no media was fetched again"
    assert ledger.state_counts() == committed


def test_a_home_made_with_per_source_partitions_is_refused_until_upgraded(crawl_home, simulator, instance, capsys,
                                                                          monkeypatch):
    from media_crawler.store import database, schema

    path = write_recovery_config(crawl_home, simulator, [{"bilibili": "user 12345"}])
    config = load_config(path)
    # An old home: its ledger stopped at schema 3 with items in it, its Dagster instance
    # lists its sources as dynamic partitions.
    monkeypatch.setattr(schema, "SCHEMA_VERSION", 3)
    old = Ledger(config.ledger_url)
    with old.engine.begin() as conn:
        conn.execute(schema.tasks.insert().values(
            platform="bilibili", item_id="BV1old", variant="cover", kind="image", source_key="bilibili-12345",
            day="2026-11-20", canonical_url="https://i0.hdslb.com/old.jpg", media_url="https://i0.hdslb.com/old.jpg",
            state="gone", attempts=1))
    monkeypatch.undo()
    database.dispose_engines()
    instance.add_dynamic_partitions("sources", ["bilibili-12345"])

    with pytest.raises(LayoutError, match="upgrade-home"):
        crawl(path, [DAY], instance=instance)
    assert Ledger(config.ledger_url).state_counts() == {"gone": 1}, "the refusal changed nothing"

    from media_crawler.commands import upgrade_home

    class Args:
        config = str(path)

    assert upgrade_home.run(Args(), instance=instance) == 0
    assert "upgraded" in capsys.readouterr().out
    assert instance.get_dynamic_partitions("sources") == []
    outcome = crawl(path, [DAY], instance=instance)
    assert not outcome.failed, outcome.failed
    states = Ledger(config.ledger_url).state_counts()
    assert states["gone"] == 1 and states["committed"] > 0
    assert upgrade_home.run(Args(), instance=instance) == 0
    assert "nothing to do" in capsys.readouterr().out


def test_crawl_makes_its_dagster_home_when_none_is_set(crawl_home, simulator, monkeypatch, capsys):
    """A new user's first `media-crawler crawl` works without DAGSTER_HOME, as `demo` does."""
    path = write_recovery_config(crawl_home, simulator, [{"urls": f"{simulator.base_url}/urls/demo.json"}])
    monkeypatch.setenv("DAGSTER_HOME", "recorded, so that the home crawl sets is undone after the test")
    monkeypatch.delenv("DAGSTER_HOME")
    assert cli_main(["crawl", "--config", str(path), "--day", DAY]) == 0, capsys.readouterr().err[-2000:]
    assert (crawl_home / "dagster_home" / "dagster.yaml").is_file()

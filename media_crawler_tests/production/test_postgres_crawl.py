"""Crawls with Dagster storage and the ledger on PostgreSQL: a full day of every source, and two runs of one partition at once."""
from __future__ import annotations

import pytest
import yaml
from dagster import AssetKey, AssetRecordsFilter, DagsterInstance
from sqlalchemy import create_engine, func, select, text

from media_crawler.commands.crawl import crawl, prepare_home
from media_crawler.config import load_config
from media_crawler.deploy.services import BIN, ServiceGroup, dagster_env
from media_crawler.store.ledger import COMMITTED, T
from media_crawler_tests.conftest import without_rate_waits, write_config
from media_crawler_tests.production.conftest import (
    assert_store_sound,
    expected_blobs,
    truth_of,
    wait_until,
    write_postgres_home,
)

@pytest.fixture(scope="module")
def slow_simulator():
    """Media answers take 0.5 s: two runs of one partition started together overlap in every stage."""
    from media_crawler_sim.app import Behaviour
    from media_crawler_sim.server import Simulator

    with Simulator(seed=1, port=0, behaviour=Behaviour(media_latency_ms=500)) as sim:
        yield sim


def test_a_day_of_every_source_with_dagster_storage_and_ledger_on_postgres(pg_env, demo_config, simulator, tmp_path):
    # The demo's sources without its request budgets: the claim is where things are stored.
    demo_config.write_text(yaml.safe_dump(without_rate_waits(yaml.safe_load(demo_config.read_text()))))
    dagster_home = write_postgres_home(tmp_path / "dagster_home")
    truth = truth_of(simulator)
    day = truth["days"][-1]
    with DagsterInstance.from_config(str(dagster_home)) as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        outcome = crawl(demo_config, [day], instance=instance)
        assert not outcome.failed, [(p.source_key, p.error) for p in outcome.failed]
        # Six partitions, in ranged runs (several shards of a platform and day per run).
        assert len(outcome.partitions) == 6
        run_ids = {p.run_id for p in outcome.partitions}
        assert {run.run_id for run in instance.get_runs()} == run_ids

    config = load_config(demo_config)
    assert config.ledger_url == pg_env
    assert_store_sound(config.store_root, expected_blobs(truth, {s.key for s in config.sources}, {day}))
    engine = create_engine(pg_env)
    try:
        with engine.connect() as conn:
            # Dagster's run table and the ledger's tasks live side by side in the one database.
            assert conn.execute(text("SELECT count(*) FROM runs")).scalar() == len(run_ids)
            committed = conn.execute(select(func.count()).select_from(T).where(T.c.state == COMMITTED)).scalar()
            assert committed == conn.execute(select(func.count()).select_from(T)).scalar() > 0
    finally:
        engine.dispose()


def test_two_runs_of_one_partition_at_once_commit_each_item_once(pg_env, crawl_home, slow_simulator, tmp_path):
    dagster_home = write_postgres_home(tmp_path / "dagster_home")
    config_path = write_config(crawl_home, slow_simulator, [{"bilibili": "user 12345"}])
    config = load_config(config_path)
    truth = truth_of(slow_simulator)
    day = "2026-11-26"  # bilibili's richest day: covers, DASH video and audio tracks
    with DagsterInstance.from_config(str(dagster_home)) as instance:
        prepare_home(instance, config)  # also creates Dagster's tables once, before two processes race to

    env = dagster_env(dagster_home=dagster_home, config_path=config_path, media_home=crawl_home)
    argv = [str(BIN / "dagster"), "asset", "materialize", "-m", "media_crawler.definitions", "--select", "*",
            "--partition", f"{day}|{config.layout.shard_of('bilibili-12345')}"]  # in-process: the definitions' default
    with ServiceGroup(env, log_dir=tmp_path / "logs") as group:
        runs = [group.start(f"run-{n}", argv) for n in (1, 2)]
        wait_until(lambda: not any(run.running() for run in runs), timeout=240, what="both runs to end")
        exit_codes = [run.process.returncode for run in runs]

    assert 0 in exit_codes, "at least one run finishes the partition:\n" + "\n".join(r.log_tail() for r in runs)
    expected = expected_blobs(truth, {"bilibili-12345"}, {day})
    assert_store_sound(config.store_root, expected)
    from media_crawler.store.ledger import Ledger

    tasks = Ledger(pg_env).tasks(source_key="bilibili-12345", day=day)
    assert {task.state for task in tasks} == {COMMITTED}
    assert len({(t.platform, t.item_id, t.variant) for t in tasks}) == len(tasks)

    # Nothing was downloaded or committed twice: one GET per media file, one new blob per sha256.
    stats = slow_simulator.app.stats.snapshot()["by_path"]
    media_gets = {path: entry["requests"] for path, entry in stats.items() if path.startswith("/media/")}
    assert media_gets and max(media_gets.values()) == 1, media_gets
    with DagsterInstance.from_config(str(dagster_home)) as instance:
        records = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=AssetKey("committed_media"), asset_partitions=[f"{day}|{config.layout.shard_of('bilibili-12345')}"]),
            limit=10).records
        created = sum(record.asset_materialization.metadata["items_ok"].value for record in records)
    # A run that found the other holding some items fails its partition (they were unfinished
    # from its side) and records no materialization, so the counted blobs may fall short, never over.
    assert 0 < created <= len(expected)

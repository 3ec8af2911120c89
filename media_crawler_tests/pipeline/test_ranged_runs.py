"""Runs that carry several shards (issue 28): Dagster's cost of a run is paid once for
`partitions.shards_per_run` partitions, and each partition still succeeds or fails on its own."""
from __future__ import annotations

import io
from collections import Counter

import pytest
import yaml
from dagster import AssetKey, DagsterEventType, DagsterInstance, DagsterRunStatus, RunsFilter

from media_crawler.commands.crawl import crawl
from media_crawler.config import config_from_dict, load_config
from media_crawler.defs.partitions import crawl_partitions
from media_crawler.platforms.registry import parse_source
from media_crawler.shards import RANGE_END_TAG, RANGE_START_TAG, partitions_of_run, range_tags, run_ranges
from media_crawler_sim import Simulator
from media_crawler_sim.scale import WorldSize
from media_crawler_sim.scale.lazy import LazyMap

SHARDS = 32
PER_RUN = 4
# One post with one part a day per uploader: the cheapest world that has work in every shard.
TINY = WorldSize(bilibili_users=300, weibo_users=0, facebook_pages=0, url_lists=0, posts_per_day=1, media_per_post=1)


def one_source_a_shard(entries: list[dict], layout) -> list[dict]:
    """The first source of each shard, until every shard holds one."""
    chosen: dict[str, dict] = {}
    for entry in entries:
        chosen.setdefault(layout.shard_of(parse_source("bilibili", entry["bilibili"])), entry)
    assert len(chosen) == SHARDS, f"the world's uploaders fill only {len(chosen)} of {SHARDS} shards"
    return list(chosen.values())


def test_a_run_holds_consecutive_shards_of_one_platform_and_steps_only_over_shards_without_sources():
    layout = config_from_dict({"partitions": {"shards": {"bilibili": 10, "weibo": 3}, "shards_per_run": 3}}).layout
    b, w = (lambda i: f"bilibili-s{i:02d}"), (lambda i: f"weibo-s{i:02d}")
    wanted = [b(0), b(2), b(3), b(4), b(5), b(9), w(0), w(2)]
    holding = [*wanted, w(1)]  # bilibili-s01 holds no source; weibo-s01 holds one that was not asked for
    assert run_ranges(layout, wanted, holding) == [
        (b(0), b(1), b(2)), (b(3), b(4), b(5)), (b(9),), (w(0),), (w(2),)]
    assert run_ranges(config_from_dict({"partitions": {"shards_per_run": 1}}).layout, [b(0), b(1)], [b(0), b(1)]) == [
        (b(0),), (b(1),)]
    # What a run's tags say it carries (in-flight and failed-partition detection read this).
    assert partitions_of_run(range_tags("2026-11-25", [b(8), b(9)])) == ["2026-11-25|bilibili-s08",
                                                                         "2026-11-25|bilibili-s09"]
    assert partitions_of_run({"dagster/partition": "2026-11-25|weibo-s01"}) == ["2026-11-25|weibo-s01"]
    across = {RANGE_START_TAG: "2026-11-25|bilibili-s09", RANGE_END_TAG: "2026-11-26|weibo-s00"}
    assert partitions_of_run(across, layout.shard_keys()) == [
        "2026-11-25|bilibili-s09", "2026-11-25|weibo-s00", "2026-11-26|bilibili-s09", "2026-11-26|weibo-s00"]


STAGES = ("media_records", "media_downloads", "verified_media", "committed_media")


def materializations_by_partition(instance) -> Counter:
    """(stage, partition) -> how many materializations Dagster recorded."""
    return Counter((stage, str(record.partition_key)) for stage in STAGES
                   for record in instance.fetch_materializations(AssetKey(stage), limit=10_000).records)


def media_paths(sim) -> dict[str, int]:
    """Media requests the simulator answered, by path."""
    return {path: entry["requests"] for path, entry in sim.app.stats.snapshot()["by_path"].items()
            if path.startswith("/media/")}


def what_reports_say(config_path, instance) -> dict:
    """What `failures`, `status` and `health --ready` tell the operator: failures' and health's documents as
    text (they would name a source), status's unresolved feed errors (it counts them by platform and class)."""
    import json
    import time

    from media_crawler.observe.health import ready
    from media_crawler.observe.status import build_status
    from media_crawler.store.ledger import Ledger
    from media_crawler.store.reports.failures import failure_report

    config = load_config(config_path)
    engine = Ledger(config.ledger_url).engine
    now = time.time()
    status = build_status(engine, config, now, instance=instance)
    health = ready(engine, config, now)
    return {"failures": json.dumps(failure_report(engine, now=now).as_json()),
            "feed_errors": status["feed_errors_unresolved"],
            "health": json.dumps(health.as_json()), "health_ok": health.ok}


def hiding(users: LazyMap, source: str) -> LazyMap:
    """The simulated platform's uploaders without the one `source` names ("user <mid>")."""
    hidden = int(source.split()[-1])
    return LazyMap(lambda mid: None if mid == hidden else users.get(mid), lambda: iter(users), len(users))


@pytest.fixture
def instance():
    with DagsterInstance.ephemeral() as inst:
        yield inst


def schedule_then_launch_one(config_path, day: str, instance, monkeypatch):
    """The daily schedule's requests for `day`; the first is executed as the daemon would,
    through the code location's crawl job (its partitioned config, its resources)."""
    from datetime import datetime, time, timedelta, timezone

    from dagster import build_schedule_context

    from media_crawler.definitions import build_definitions
    from media_crawler.defs.resources import crawl_resources
    from media_crawler.environment import CONFIG_ENV

    monkeypatch.setenv(CONFIG_ENV, str(config_path))
    defs = build_definitions(load_config(config_path).layout)
    tick = datetime.combine(date_of(day) + timedelta(days=1), time(0, 30), tzinfo=timezone.utc)
    with build_schedule_context(instance=instance, scheduled_execution_time=tick,
                                resources=crawl_resources(str(config_path))) as context:
        requests = list(defs.get_schedule_def("daily_crawl_schedule")(context))
    first = requests[0]
    result = defs.resolve_job_def("crawl").execute_in_process(instance=instance, tags=first.tags,
                                                              raise_on_error=False)
    return requests, first, result


def date_of(day: str):
    from datetime import date

    return date.fromisoformat(day)


def test_32_shards_in_at_most_8_runs_a_failing_source_reds_only_its_partition_and_once_fixed_only_it_reruns(
        crawl_home, instance, monkeypatch):
    partitions = {"shards": {"bilibili": SHARDS}, "shards_per_run": PER_RUN}
    layout = config_from_dict({"partitions": partitions}).layout
    with Simulator(seed=3, port=0, days=1, size=TINY) as sim:
        [day] = sim.truth()["days"]
        path = sim.write_sources(crawl_home.parent / "world.yaml")
        data = yaml.safe_load(path.read_text())
        healthy = one_source_a_shard(data["sources"], layout)
        # A second uploader in a shard after the scheduled run's range: the source made to fail.
        broken = next(entry for entry in data["sources"] if entry not in healthy and
                      layout.shard_of(parse_source("bilibili", entry["bilibili"]).key) >= f"bilibili-s{PER_RUN:02d}")
        broken_key = parse_source("bilibili", broken["bilibili"]).key
        broken_shard = layout.shard_of(broken_key)
        data["sources"] = [*healthy, broken]
        for settings in data["platforms"].values():
            settings.update(rate=1000, burst=1000)
        data.update(partitions=partitions, store=str(crawl_home / "store"),
                    ledger_url=f"sqlite:///{crawl_home / 'ledger.db'}")
        crawl_home.mkdir(parents=True, exist_ok=True)
        config_path = crawl_home / "sources.yaml"
        config_path.write_text(yaml.safe_dump(data))

        with monkeypatch.context() as fault:
            # The platform answers "no such uploader" for the broken source (-404) until the fault is lifted.
            fault.setattr(sim.app.world, "bilibili_users", hiding(sim.app.world.bilibili_users, broken["bilibili"]))
            outcome = crawl(config_path, [day], instance=instance)
            scheduled = schedule_then_launch_one(config_path, day, instance, monkeypatch)

        # The schedule asks for the same runs; one of them, run through the crawl job, commits its range.
        requests, first, result = scheduled
        assert len(requests) == SHARDS // PER_RUN and all(r.partition_key is None for r in requests)
        assert sorted(k for r in requests for k in partitions_of_run(r.tags)) == sorted(
            f"{day}|{shard}" for shard in layout.shard_keys() if shard.startswith("bilibili-"))
        assert all(r.tags["media_crawler/platform"] == "bilibili" for r in requests)
        assert result.success
        assert sorted(str(m.partition) for m in result.asset_materializations_for_node("committed_media")) == \
            partitions_of_run(first.tags)
        # The checks ran once for the run and say which partition each count is of.
        checks = {e.asset_check_evaluation_data.check_name: e.asset_check_evaluation_data
                  for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"}
        assert set(checks) == {"committed_media_hashes_match", "committed_media_nothing_gone"}
        for check in checks.values():
            assert check.passed and sorted(check.metadata["by_partition"].value) == partitions_of_run(first.tags)
        scheduled_run = result.run_id

        runs = [record.dagster_run for record in instance.get_run_records(RunsFilter()) if record.dagster_run.run_id
                != scheduled_run]
        assert len(runs) <= SHARDS // PER_RUN, f"{len(runs)} runs for {SHARDS} partitions"
        covered = [key for run in runs for key in partitions_of_run(run.tags)]
        assert sorted(covered) == sorted(f"{day}|{shard}" for shard in layout.shard_keys()
                                         if shard.startswith("bilibili-")), "each partition in exactly one run"

        # Every partition was worked and reported on its own; only the broken source's is red.
        assert len(outcome.partitions) == SHARDS
        failed = {partition.shard: partition for partition in outcome.partitions if not partition.success}
        assert set(failed) == {broken_shard}, {shard: p.error for shard, p in failed.items()}
        assert broken_key in failed[broken_shard].error and broken_shard in failed[broken_shard].error
        [failed_run] = [run for run in runs if run.status == DagsterRunStatus.FAILURE]
        assert len(partitions_of_run(failed_run.tags)) > 1, "the broken partition shared its run with healthy ones"

        # Dagster's own record agrees: every partition of the day materialized but that one, which is failed.
        keys = [f"{day}|{shard}" for shard in layout.shard_keys() if shard.startswith("bilibili-")]
        defs = crawl_partitions(load_config(config_path).layout)
        status = instance.get_status_by_partition(AssetKey("committed_media"), keys, defs)
        red = {key for key, value in status.items() if value is not None and value.value == "FAILED"}
        green = {key for key, value in status.items() if value is not None and value.value == "MATERIALIZED"}
        assert red == {f"{day}|{broken_shard}"}, red
        assert green == set(keys) - red
        # Upstream stages materialized every partition, the broken one too (its feed failure is data, not a crash).
        assert set(instance.get_materialized_partitions(AssetKey("media_records"))) == set(keys)

        # The broken source is named in its own partition's metadata, and only there.
        records = instance.fetch_materializations(AssetKey("media_records"), limit=100).records
        failing = {str(r.partition_key): r.asset_materialization.metadata["sources_failed"].value for r in records}
        assert {key for key, count in failing.items() if count} == {f"{day}|{broken_shard}"}
        [row] = next(r for r in records if str(r.partition_key) == f"{day}|{broken_shard}") \
            .asset_materialization.metadata["failed_sources"].value.records
        assert row.data["source"] == broken_key

        # What rerun-failed and the sensor read: only the red partition failed, though its run held others.
        from media_crawler.commands.rerun_failed import rerun
        from media_crawler.recovery.runs import failed_partitions

        assert [(p.partition, p.run_id) for p in failed_partitions(instance)] == [(f"{day}|{broken_shard}", failed_run.run_id)]
        said = io.StringIO()
        rerun(str(config_path), instance=instance, dry_run=True, out=said)
        assert [line for line in said.getvalue().splitlines() if line.startswith("would re-run")] == [
            f"would re-run {day} {broken_shard}: latest run {failed_run.run_id[:8]} failed"], said.getvalue()
        assert broken_key in what_reports_say(config_path, instance)["failures"]
        assert what_reports_say(config_path, instance)["feed_errors"] == {"bilibili/not_found": 1}

        # The fault is lifted (the context above ended): rerun-failed re-runs the red partition, alone.
        before = materializations_by_partition(instance)
        media_before = media_paths(sim)
        runs_before = {record.dagster_run.run_id for record in instance.get_run_records(RunsFilter())}
        said = io.StringIO()
        assert rerun(str(config_path), instance=instance, out=said) == 0, said.getvalue()
        media_after = media_paths(sim)
        broken_media = {m["path"] for m in sim.truth_media() if m["source"] == f"bilibili: {broken['bilibili']}"
                        and m["day"] == day}

    new_runs = [record.dagster_run for record in instance.get_run_records(RunsFilter())
                if record.dagster_run.run_id not in runs_before]
    assert [partitions_of_run(run.tags) for run in new_runs] == [[f"{day}|{broken_shard}"]]
    assert new_runs[0].status == DagsterRunStatus.SUCCESS
    # No stage materialized another partition again; each stage materialized the red one once more.
    after = materializations_by_partition(instance)
    assert {key: count - before.get(key, 0) for key, count in after.items() if count != before.get(key, 0)} == {
        (asset, f"{day}|{broken_shard}"): 1 for asset in STAGES}
    # The media asked for are the recovered source's, each once: none of a healthy source, its shard-mate's included.
    asked = {path: count - media_before.get(path, 0) for path, count in media_after.items()
             if count != media_before.get(path, 0)}
    assert broken_media and set(asked) == broken_media and set(asked.values()) == {1}, asked
    # Dagster's partition status (what the UI shows) is green for the whole day now.
    status = instance.get_status_by_partition(AssetKey("committed_media"), keys, defs)
    assert {key for key, value in status.items() if value is None or value.value != "MATERIALIZED"} == set()
    assert failed_partitions(instance) == []
    said = what_reports_say(config_path, instance)
    assert broken_key not in said["failures"] and said["feed_errors"] == {}
    assert said["health_ok"] and broken_key not in said["health"]


def test_a_range_may_hold_a_shard_without_sources_and_it_is_simply_done(crawl_home, simulator, instance):
    from media_crawler.commands.partition_runs import PartitionJob, PartitionRunner, RunJob
    from media_crawler_tests.recovery.support import write_recovery_config

    path = write_recovery_config(crawl_home, simulator, [{"bilibili": "user 12345"}],
                                 partitions={"shards": {"bilibili": 2}, "shards_per_run": 2})
    config = load_config(path)
    [held] = config.layout.group(["bilibili-12345"])
    day = "2026-11-27"
    crawl(path, [day], instance=instance, shards=[held])  # registers the source; a run of its one shard
    runner = PartitionRunner(path, instance)
    outcomes = runner.run(RunJob(day, tuple(PartitionJob(shard, day, ("bilibili-12345",) if shard == held else ())
                                            for shard in ("bilibili-s00", "bilibili-s01"))))
    assert [(o.shard, o.success) for o in outcomes] == [("bilibili-s00", True), ("bilibili-s01", True)], outcomes
    assert len({o.run_id for o in outcomes}) == 1
    assert set(instance.get_materialized_partitions(AssetKey("committed_media"))) == {
        f"{day}|bilibili-s00", f"{day}|bilibili-s01"}


def test_an_error_in_one_partition_of_an_earlier_stage_is_named_and_the_others_are_still_worked(
        crawl_home, simulator, instance, monkeypatch):
    """The documented limit: Dagster skips the later steps for the whole range, so both
    partitions are red at committed_media, but the healthy one was verified and the
    failure names the partition that failed."""
    from media_crawler.commands.partition_runs import PartitionJob, PartitionRunner, RunJob
    from media_crawler.defs import assets
    from media_crawler.errors import CrawlError, ErrorClass
    from media_crawler_tests.recovery.support import write_recovery_config

    path = write_recovery_config(crawl_home, simulator, [{"bilibili": "user 12345"}],
                                 partitions={"shards": {"bilibili": 2}, "shards_per_run": 2})
    [held] = load_config(path).layout.group(["bilibili-12345"])
    [other] = {"bilibili-s00", "bilibili-s01"} - {held}
    day = "2026-11-27"
    crawl(path, [day], instance=instance, shards=[held])
    verify = assets.verify_partition

    def verify_or_refuse(runtime, sources, window):
        if not sources:  # the shard without sources stands for a partition whose verification breaks
            raise CrawlError(ErrorClass.PARSE_ERROR, "a verifier that cannot read its input")
        return verify(runtime, sources, window)

    monkeypatch.setattr(assets, "verify_partition", verify_or_refuse)
    outcomes = PartitionRunner(path, instance).run(RunJob(day, tuple(
        PartitionJob(shard, day, ("bilibili-12345",) if shard == held else ()) for shard in sorted((held, other)))))
    assert not any(o.success for o in outcomes)
    for outcome in outcomes:
        assert f"{other} {day}: parse_error: a verifier that cannot read its input" in outcome.error, outcome.error
    [run_id] = {o.run_id for o in outcomes}
    verified = instance.get_records_for_run(run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION).records
    assert {(r.event_log_entry.dagster_event.asset_key.to_user_string(), r.event_log_entry.dagster_event.partition)
            for r in verified if r.event_log_entry.dagster_event.asset_key.to_user_string() == "verified_media"} == {
        ("verified_media", f"{day}|{held}")}

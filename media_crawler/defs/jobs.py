"""The crawl job, its daily schedule, and the sensors that keep partitions fresh."""

import json
from datetime import datetime, timedelta, timezone

from dagster import (
    AssetSelection,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    PartitionedConfig,
    RunRequest,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    define_asset_job,
    schedule,
    sensor,
)

from media_crawler.config import ConfigError
from media_crawler.defs.assets import GROUP
from media_crawler.defs.partitions import crawl_partitions, partition_key, source_partitions, split_partition_key
from media_crawler.defs.resources import CrawlerResource
from media_crawler.deploy.workers import PLATFORM_TAG, plan_from_environment
from media_crawler.pipeline.unfinished import unfinished_partitions
from media_crawler.recovery import rerequest
from media_crawler.recovery.runs import fail_dead_runs, in_flight_partitions


def platform_tags(key) -> dict[str, str]:
    """Every run of a partition carries its platform as a tag: the instance's
    per-platform run limit (see deploy/workers.py) counts runs by this tag."""
    source_key, _window = split_partition_key(key)
    return {PLATFORM_TAG: source_key.split("-", 1)[0]}


def partitioned_run_config(run_config: dict) -> PartitionedConfig:
    """A PartitionedConfig, not plain job tags: backfills, schedules, sensors and
    the launchpad all resolve a partition's tags through it, so every run is tagged."""
    return PartitionedConfig(partitions_def=crawl_partitions, run_config_for_partition_key_fn=lambda _key: run_config,
                             tags_for_partition_key_fn=platform_tags)


# `workers: N` caps the step processes of one run (README "Workers").
_EXECUTION = {"execution": {"config": {"multiprocess": {"max_concurrent": plan_from_environment().executor_max_concurrent}}}}
crawl_job = define_asset_job("crawl", selection=AssetSelection.groups(GROUP), config=partitioned_run_config(_EXECUTION),
                             description="All four stages for one partition.")

# How many recent days a newly registered source gets crawled for.
RECENT_DAYS = 3


@schedule(job=crawl_job, cron_schedule="30 0 * * *", execution_timezone="UTC",
          default_status=DefaultScheduleStatus.STOPPED)
def daily_crawl_schedule(context: ScheduleEvaluationContext, crawler: CrawlerResource):
    """Every day at 00:30 UTC: crawl yesterday for every source in sources.yaml."""
    yesterday = (context.scheduled_execution_time.astimezone(timezone.utc) - timedelta(days=1)).date().isoformat()
    registered = set(context.instance.get_dynamic_partitions(source_partitions.name))
    for source in crawler.load().sources:
        if source.key in registered:
            yield RunRequest(run_key=f"{source.key}|{yesterday}", partition_key=partition_key(source.key, yesterday))


@sensor(job=crawl_job, minimum_interval_seconds=60, default_status=DefaultSensorStatus.RUNNING)
def source_registration_sensor(context: SensorEvaluationContext, crawler: CrawlerResource):
    """Registers sources newly added to sources.yaml as partitions and requests their recent days."""
    try:
        config = crawler.load()
    except ConfigError as error:
        return SkipReason(f"sources file unreadable: {error}")
    registered = set(context.instance.get_dynamic_partitions(source_partitions.name))
    new = [source.key for source in config.sources if source.key not in registered]
    if not new:
        return SkipReason("no new sources")
    today = datetime.now(timezone.utc).date()
    days = [(today - timedelta(days=offset)).isoformat() for offset in range(1, RECENT_DAYS + 1)]
    return SensorResult(
        dynamic_partitions_requests=[source_partitions.build_add_request(new)],
        run_requests=[RunRequest(run_key=f"register|{key}|{day}", partition_key=partition_key(key, day))
                      for key in new for day in days],
    )


@sensor(job=crawl_job, minimum_interval_seconds=60, default_status=DefaultSensorStatus.RUNNING)
def unfinished_partitions_sensor(context: SensorEvaluationContext, crawler: CrawlerResource):
    """Re-runs partitions whose ledger still holds unfinished items (a failed or
    killed run, a platform that was down), so the backlog drains without an
    operator. Backoff per partition (2 min doubling to 1 h, kept in the cursor),
    at most a few partitions per tick, never beside a run already in flight.
    Each tick also marks failed the runs whose process died (recovery/runs.py)."""
    dead = fail_dead_runs(context.instance)
    registered = set(context.instance.get_dynamic_partitions(source_partitions.name))
    in_flight = {tuple(reversed(key.split("|", 1))) for key in in_flight_partitions(context.instance)}
    unfinished = [(source_key, day) for source_key, day, _count in unfinished_partitions(crawler.runtime().ledger)]
    due, state = rerequest.plan_rerequests(unfinished, json.loads(context.cursor or "{}"), rerequest.clock(),
                                           registered=registered, in_flight=in_flight)
    context.update_cursor(json.dumps(state))
    requests = [RunRequest(run_key=f"rerequest|{item.source_key}|{item.day}|{item.number}",
                           partition_key=partition_key(item.source_key, item.day)) for item in due]
    if requests:
        return requests
    return SkipReason(f"no unfinished partition is due ({len(unfinished)} unfinished, {len(dead)} dead run(s) failed)")

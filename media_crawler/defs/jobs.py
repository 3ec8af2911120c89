"""The crawl job, its daily schedule, and the sensors that keep partitions fresh.

Built per partition layout (`build_crawl_job`, `build_automation`): the job's
partitions are the shard × day partitions of sources.yaml (defs/partitions.py).
"""

import hashlib
import json
from datetime import datetime, timedelta, timezone
from functools import lru_cache

from dagster import (
    AssetSelection,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    PartitionedConfig,
    RunRequest,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SkipReason,
    define_asset_job,
    in_process_executor,
    schedule,
    sensor,
)

from media_crawler.config import ConfigError
from media_crawler.defs.assets import GROUP
from media_crawler.defs.partitions import crawl_partitions, partition_key, split_partition_key
from media_crawler.defs.resources import CrawlConfigResource, LedgerResource
from media_crawler.deploy.workers import PLATFORM_TAG
from media_crawler.pipeline.layout import check_layout
from media_crawler.store.reports.reads import unfinished_partition_counts as unfinished_partitions
from media_crawler.recovery import rerequest
from media_crawler.recovery.runs import fail_dead_runs, in_flight_partitions
from media_crawler.shards import PartitionLayout, range_tags, run_ranges, shard_platform
from media_crawler.store.source_state import register_sources

# How many recent days a newly registered source gets crawled for.
RECENT_DAYS = 3


def platform_tags(key) -> dict[str, str]:
    """Every run of a partition carries its platform as a tag: the instance's
    per-platform run limit (see deploy/workers.py) counts runs by this tag."""
    shard, _window = split_partition_key(key)
    return {PLATFORM_TAG: shard_platform(shard)}


def partitioned_run_config(layout: PartitionLayout, run_config: dict) -> PartitionedConfig:
    """A PartitionedConfig, not plain job tags: backfills, schedules, sensors and
    the launchpad all resolve a partition's tags through it, so every run is tagged."""
    return PartitionedConfig(partitions_def=crawl_partitions(layout), run_config_for_partition_key_fn=lambda _key: run_config,
                             tags_for_partition_key_fn=platform_tags)


@lru_cache(maxsize=16)
def build_crawl_job(layout: PartitionLayout):
    # The four steps of a partition are a chain: separate step processes would only
    # add a process start each (2-3 s, ../shared/DAGSTER.md) and gain nothing, so one
    # run executes in one process (as the code location's default executor does for
    # the asset graph's runs, definitions.py); parallelism comes from runs over
    # partitions (the run queue's limits, deploy/workers.py). `workers: N` sets those limits.
    return define_asset_job("crawl", selection=AssetSelection.groups(GROUP), executor_def=in_process_executor,
                            config=partitioned_run_config(layout, {}),
                            description="All four stages for one partition (one shard of sources, one day).")


def _digest(keys) -> str:
    return hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()[:12]


def ranged_run_requests(layout: PartitionLayout, day: str, shards, holding, run_key) -> list[RunRequest]:
    """One RunRequest per run of `shards` on `day`: up to `layout.shards_per_run` consecutive
    shards of one platform (shards.py `run_ranges`; `holding`: the shards that hold a source).
    A run of one shard is a plain partition request, as before; a run of several carries
    Dagster's range tags (a RunRequest has no range argument: Dagster reads the tags, and
    the steps get context.partition_keys) and the platform tag, which Dagster adds from the
    job's partitioned config only for a single partition. `run_key(shards)` names each run."""
    requests = []
    for shards_of_run in run_ranges(layout, shards, holding):
        if len(shards_of_run) == 1:
            requests.append(RunRequest(run_key=run_key(shards_of_run),
                                       partition_key=partition_key(shards_of_run[0], day)))
        else:
            requests.append(RunRequest(run_key=run_key(shards_of_run), tags={
                **range_tags(day, shards_of_run), PLATFORM_TAG: shard_platform(shards_of_run[0])}))
    return requests


def _span(shards) -> str:
    """How a run key names the shards of its run: one, or the first and last."""
    return shards[0] if len(shards) == 1 else f"{shards[0]}..{shards[-1]}"


def build_automation(layout: PartitionLayout, crawl_job) -> list:
    """The schedule and the two sensors for the crawl job of `layout`."""

    @schedule(job=crawl_job, cron_schedule="30 0 * * *", execution_timezone="UTC",
              default_status=DefaultScheduleStatus.STOPPED)
    def daily_crawl_schedule(context: ScheduleEvaluationContext, crawl_config: CrawlConfigResource):
        """Every day at 00:30 UTC: crawl yesterday for every shard that holds a source of sources.yaml."""
        yesterday = (context.scheduled_execution_time.astimezone(timezone.utc) - timedelta(days=1)).date().isoformat()
        config = crawl_config.load()
        holding = config.layout.group(source.key for source in config.sources)
        yield from ranged_run_requests(config.layout, yesterday, holding, holding,
                                       lambda shards: f"{_span(shards)}|{yesterday}")

    @sensor(job=crawl_job, minimum_interval_seconds=60, default_status=DefaultSensorStatus.RUNNING)
    def source_registration_sensor(context: SensorEvaluationContext, crawl_config: CrawlConfigResource,
                                   ledger: LedgerResource):
        """Registers sources newly added to sources.yaml (in the ledger) and requests
        the recent days of the shards that hold them."""
        try:
            config = crawl_config.load()
            check_layout(ledger.get(), config, instance=context.instance)
        except ConfigError as error:
            return SkipReason(f"not registering sources: {error}")
        new = register_sources(ledger.get(), ((source.key, source.platform) for source in config.sources))
        if not new:
            return SkipReason("no new sources")
        today = datetime.now(timezone.utc).date()
        days = [(today - timedelta(days=offset)).isoformat() for offset in range(1, RECENT_DAYS + 1)]
        added = config.layout.group(new)
        holding = config.layout.group(source.key for source in config.sources)

        def run_key(shards, day):
            return f"register|{_span(shards)}|{day}|{_digest(key for shard in shards for key in added[shard])}"

        return [request for day in days
                for request in ranged_run_requests(config.layout, day, added, holding,
                                                   lambda shards, day=day: run_key(shards, day))]

    @sensor(job=crawl_job, minimum_interval_seconds=60, default_status=DefaultSensorStatus.RUNNING)
    def unfinished_partitions_sensor(context: SensorEvaluationContext, crawl_config: CrawlConfigResource,
                                     ledger: LedgerResource):
        """Re-runs partitions whose ledger still holds unfinished items (a failed or
        killed run, a platform that was down), so the backlog drains without an
        operator. Backoff per partition (2 min doubling to 1 h, kept in the cursor),
        at most a few partitions per tick, never beside a run already in flight.
        Each tick also marks failed the runs whose process died (recovery/runs.py)."""
        dead = fail_dead_runs(context.instance)
        try:
            config = crawl_config.load()
            check_layout(ledger.get(), config, instance=context.instance)
        except ConfigError as error:
            return SkipReason(f"not re-requesting partitions: {error}")
        configured = {source.key for source in config.sources}
        shards: dict[tuple[str, str], int] = {}
        for source_key, day, count in unfinished_partitions(ledger.get()):
            if source_key in configured:
                pair = (config.layout.shard_of(source_key), day)
                shards[pair] = shards.get(pair, 0) + count
        in_flight = {tuple(reversed(key.split("|", 1))) for key in in_flight_partitions(context.instance, config.layout.shard_keys())}
        unfinished = sorted(shards, key=lambda pair: (pair[1], pair[0]))
        due, state = rerequest.plan_rerequests(unfinished, json.loads(context.cursor or "{}"), rerequest.clock(),
                                               registered={shard for shard, _day in unfinished}, in_flight=in_flight)
        context.update_cursor(json.dumps(state))
        holding = config.layout.group(configured)
        requests = []
        for day in sorted({item.day for item in due}):
            numbers = {item.source_key: item.number for item in due if item.day == day}  # source_key: the shard
            requests.extend(ranged_run_requests(
                config.layout, day, numbers, holding,
                lambda shards, day=day, numbers=numbers:
                    f"rerequest|{_span(shards)}|{day}|{'.'.join(str(numbers[s]) for s in shards if s in numbers)}"))
        if requests:
            return requests
        return SkipReason(f"no unfinished partition is due ({len(unfinished)} unfinished, {len(dead)} dead run(s) failed)")

    return [daily_crawl_schedule, source_registration_sensor, unfinished_partitions_sensor]

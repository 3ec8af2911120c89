"""The crawl job, its daily schedule, and the sensors that keep partitions fresh."""

import json
import time
from datetime import datetime, timedelta, timezone

from dagster import (
    AssetSelection,
    DefaultScheduleStatus,
    DefaultSensorStatus,
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
from media_crawler.defs.partitions import partition_key, source_partitions
from media_crawler.defs.resources import CrawlerResource
from media_crawler.pipeline.unfinished import unfinished_partitions

crawl_job = define_asset_job("crawl", selection=AssetSelection.groups(GROUP), description="All four stages for one partition.")

# How many recent days a newly registered source gets crawled for.
RECENT_DAYS = 3
# At most this many re-requests per sensor tick, so a long outage cannot flood the queue.
MAX_REREQUESTS_PER_TICK = 5


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


@sensor(job=crawl_job, minimum_interval_seconds=120, default_status=DefaultSensorStatus.STOPPED)
def unfinished_partitions_sensor(context: SensorEvaluationContext, crawler: CrawlerResource):
    """Re-requests partitions whose ledger still holds unfinished items, with
    backoff per partition (stored in the cursor) and a bound per tick."""
    state = json.loads(context.cursor or "{}")
    runtime = crawler.runtime()
    now = time.time()
    requests = []
    for source_key, day, attempts in unfinished_partitions(runtime.ledger):
        entry = state.get(f"{source_key}|{day}", {"n": 0, "at": 0})
        wait = min(3600, 120 * (2 ** entry["n"]))
        if now - entry["at"] < wait:
            continue
        state[f"{source_key}|{day}"] = {"n": entry["n"] + 1, "at": now}
        requests.append(RunRequest(run_key=f"rerequest|{source_key}|{day}|{entry['n']}",
                                   partition_key=partition_key(source_key, day)))
        if len(requests) >= MAX_REREQUESTS_PER_TICK:
            break
    context.update_cursor(json.dumps(state))
    return requests or SkipReason("no unfinished partitions are due")

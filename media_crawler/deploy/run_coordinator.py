"""The run queue, with every partition's run tagged by its platform.

The per-platform run limit (`concurrency.runs.tag_concurrency_limits` on
`media_crawler/platform`, deploy/workers.py) counts runs by that tag. The
`crawl` job's runs carry it from their partitioned config (defs/jobs.py); a run
launched from the asset graph (`__ASSET_JOB`: "Materialize", a backfill picked
in the UI, `dagster asset materialize`) gets only Dagster's partition tags, so it
counted against the total but against no platform. This coordinator adds the tag
from the run's partition before the run enters the queue, so every way of
launching a partition meets the same limits. Configured in the shipped instance
files (dagster.yaml, media_crawler/instance/dagster.yaml, deploy/dagster.postgres.yaml):

    run_coordinator:
      module: media_crawler.deploy.run_coordinator
      class: PlatformTaggingRunCoordinator
"""
from __future__ import annotations

from collections.abc import Mapping

from dagster import DagsterRun, QueuedRunCoordinator, SubmitRunContext

from media_crawler.deploy.workers import PLATFORM_TAG
from media_crawler.store.dagster_private import coordinator_instance
from media_crawler.shards import PARTITION_TAG, RANGE_START_TAG, is_shard_key, shard_platform

# Dagster's tag for a dimension of a run's multi-partition key (shards.py has the others).
SHARD_DIMENSION_TAG = "dagster/partition/shard"


def platform_of_run(tags: Mapping[str, str]) -> str | None:
    """The platform a run's partition belongs to, or None (no partition, or not one of ours).
    A run of a range of partitions has no partition tag, only the range's first and last key."""
    shard = (tags.get(SHARD_DIMENSION_TAG) or tags.get(PARTITION_TAG, "").rpartition("|")[2]
             or tags.get(RANGE_START_TAG, "").rpartition("|")[2])
    return shard_platform(shard) if shard and is_shard_key(shard) else None


def with_platform_tag(tags: Mapping[str, str]) -> dict[str, str]:
    """The tags a run should carry: its own, plus the platform tag when it is missing."""
    platform = platform_of_run(tags)
    if platform is None or PLATFORM_TAG in tags:
        return {}
    return {PLATFORM_TAG: platform}


class PlatformTaggingRunCoordinator(QueuedRunCoordinator):
    """QueuedRunCoordinator that tags each run with its partition's platform before queueing it."""

    def submit_run(self, context: SubmitRunContext) -> DagsterRun:
        run = context.dagster_run
        added = with_platform_tag(run.tags)
        if added:
            coordinator_instance(self).add_run_tags(run.run_id, added)
            run = run.with_tags({**run.tags, **added})
            context = context._replace(dagster_run=run)
        return super().submit_run(context)

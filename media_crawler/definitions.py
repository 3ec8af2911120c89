"""The code location's entry point (workspace.yaml points here).

The partitions come from the `partitions:` section of the code location's
sources.yaml ($MEDIA_CRAWLER_CONFIG, else ./sources.yaml, else the demo's), read when Dagster loads the code location
(`@definitions`: importing this module reads nothing); everything else is read
by the resources when a run or tick needs it (defs/resources.py). Without a sources file the default
layout applies (docs/SHARDS.md).
"""
from __future__ import annotations

import warnings
from functools import lru_cache

from dagster import BetaWarning, Definitions, definitions, in_process_executor

from media_crawler.config import CrawlConfig, load_config
from media_crawler.environment import default_config_path
from media_crawler.defs.assets import build_crawl_assets
from media_crawler.defs.celery import build_celery_crawl_job
from media_crawler.defs.jobs import build_automation, build_crawl_job
from media_crawler.defs.resources import crawl_resources
from media_crawler.shards import PartitionLayout

# Dagster's notes on its own beta features, for what every run of this code location
# does: the JSON handler of the shipped dagster.yaml (python_logs) and the asset
# selection behind `--select '*'`. Nothing for an operator to act on, printed on every
# CLI run. (Its CLI's SupersessionWarning comes before this module loads: README.md.)
warnings.filterwarnings("ignore", category=BetaWarning,
                        message=r"(Handling yaml-defined logging configuration|Parameter `include_sources`)")


@lru_cache(maxsize=4)
def build_definitions(layout: PartitionLayout) -> Definitions:
    """The code location for `layout`, built once per process and layout.

    Dagster loads the code location again and again in one process: a run worker
    reconstructs it for the run, again for its execution plan and again for its job's
    subset (each a new `defs()` call), and a Celery pool process (CeleryRunLauncher) for
    every run it executes. Definitions keeps the repository it resolves, so the same object
    for the same layout makes every load after the first a lookup. A changed `partitions:`
    section is another layout, hence a new build; the Celery executor's file
    (defs/celery.py) is read once per process, as a code server reads it; everything else
    is read per run or tick (defs/resources.py), and each execution initialises its own
    copies of the resources."""
    crawl_job = build_crawl_job(layout)
    schedule, *sensors = build_automation(layout, crawl_job)
    return Definitions(
        assets=list(build_crawl_assets(layout)),
        # crawl_celery exists only where dagster-celery is installed (pip install -e '.[celery]').
        jobs=[job for job in (crawl_job, build_celery_crawl_job(layout)) if job is not None],
        schedules=[schedule],
        sensors=sensors,
        resources=crawl_resources(),
        # A partition's four steps are a chain: one process per run, as `crawl` and the
        # crawl job do (defs/jobs.py crawl_execution), also for what the asset graph and
        # backfills launch (__ASSET_JOB); a job with its own executor (crawl_celery) keeps it.
        executor=in_process_executor,
    )


def crawl_assets_for(config: CrawlConfig) -> list:
    """The four assets partitioned as `config` asks (for `materialize`)."""
    return list(build_crawl_assets(config.layout))


def code_location_layout() -> PartitionLayout:
    """An unreadable sources file fails the load with its one-line reason (shown in the UI)."""
    path = default_config_path()
    return load_config(path).layout if path.exists() else PartitionLayout()


@definitions
def defs() -> Definitions:
    return build_definitions(code_location_layout())

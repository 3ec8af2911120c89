"""The crawl job with its steps on Celery workers (dagster-celery): past one machine.

Only built when dagster_celery is installed (`pip install -e '.[celery]'`), so
the code location loads without it. The executor settings come from the same
YAML file every worker starts with (`-y`): MEDIA_CRAWLER_CELERY_CONFIG names
it; deploy/celery.yaml is the documented one. Without it, the defaults below
(RabbitMQ on 127.0.0.1) apply.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from dagster import AssetSelection, define_asset_job

from media_crawler.environment import celery_config_env
from media_crawler.defs.assets import GROUP
from media_crawler.defs.jobs import partitioned_run_config
from media_crawler.shards import PartitionLayout

CELERY_JOB_NAME = "crawl_celery"
DEFAULT_CELERY_CONFIG: dict[str, Any] = {
    "broker": "pyamqp://guest:guest@127.0.0.1:5672//",
    "backend": "rpc://",
    "config_source": {"task_acks_late": True, "task_reject_on_worker_lost": True, "worker_prefetch_multiplier": 1},
}


def celery_executor_config(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """`execution.config` of the workers' YAML file, or the defaults."""
    path = path or celery_config_env()
    if not path:
        return dict(DEFAULT_CELERY_CONFIG)
    raw = yaml.safe_load(Path(path).read_text()) or {}
    return dict((raw.get("execution") or {}).get("config") or {})


def build_celery_crawl_job(layout: PartitionLayout):
    """The crawl job on the Celery executor, or None when dagster_celery is not installed."""
    try:
        from dagster_celery import celery_executor
    except ImportError:
        return None
    return define_asset_job(
        CELERY_JOB_NAME, selection=AssetSelection.groups(GROUP), config=partitioned_run_config(layout, {}),
        executor_def=celery_executor.configured(celery_executor_config(), name="crawl_celery_executor"),
        description="The crawl job with each step executed on a Celery worker (deploy/celery.yaml).",
    )

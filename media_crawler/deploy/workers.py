"""`workers: N`: one number in sources.yaml, and everything that must change with it.

A *worker* is one process executing one partition at a time: a run slot in
the daemon's queue (each run executes its steps in its one process), or a
Celery worker process started with `--concurrency=1` in the distributed
deployment. Going from one worker to four is this one setting:

| knob                         | where it lives                                   | value for N            |
|------------------------------|--------------------------------------------------|------------------------|
| runs in flight               | instance `concurrency.runs.max_concurrent_runs`  | N                      |
| runs per platform            | instance `concurrency.runs.tag_concurrency_limits` on the run tag `media_crawler/platform` | N - N//4 |
| executor                     | the code location's default: in-process           | one process per run    |
| download threads per worker  | `Runtime.download_threads`                        | 4 (4N in all)          |
| rate budget per platform     | `mc_rate_budget` in the ledger database           | unchanged: shared by all N |

The instance settings live in DAGSTER_HOME/dagster.yaml, which Dagster reads as
static YAML, so they are rendered from a template:

    python -m media_crawler.deploy.workers --config sources.yaml \
        --template deploy/dagster.postgres.yaml > "$DAGSTER_HOME/dagster.yaml"
"""
from __future__ import annotations

import argparse
import copy
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from media_crawler.pipeline.scheduling import DOWNLOAD_THREADS_PER_WORKER


# Run tag every crawl-job run carries (defs/jobs.py): the per-platform run limit keys on it.
PLATFORM_TAG = "media_crawler/platform"
MAX_WORKERS = 64
RENDERED_MARKER = "# Rendered by media_crawler.deploy.workers"


@dataclass(frozen=True)
class WorkerPlan:
    workers: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.workers <= MAX_WORKERS:
            raise ValueError(f"workers must be between 1 and {MAX_WORKERS}, got {self.workers}")

    @property
    def max_concurrent_runs(self) -> int:
        return self.workers

    @property
    def runs_per_platform(self) -> int:
        # Keep a quarter of the slots out of any one platform's reach: a platform
        # in a long backoff (500s for an hour) must not hold every run slot while
        # the other platforms' partitions wait. Below 4 workers there is nothing to spare.
        return self.workers - self.workers // 4

    @property
    def executor_max_concurrent(self) -> int:
        # A partition's four stages are a chain, so a run uses one step process at a
        # time; this is the ceiling for runs that select independent steps.
        return self.workers

    @property
    def download_threads(self) -> int:
        return DOWNLOAD_THREADS_PER_WORKER

    @property
    def total_download_threads(self) -> int:
        return self.workers * DOWNLOAD_THREADS_PER_WORKER

    def run_concurrency(self) -> dict[str, Any]:
        """The `concurrency.runs` block of dagster.yaml for this plan."""
        return {
            "max_concurrent_runs": self.max_concurrent_runs,
            "tag_concurrency_limits": [
                {"key": PLATFORM_TAG, "value": {"applyLimitPerUniqueValue": True}, "limit": self.runs_per_platform},
            ],
        }

    def apply_to_instance(self, instance: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of an instance config (dagster.yaml as a dict) with this plan's run limits."""
        rendered = copy.deepcopy(dict(instance))
        concurrency = rendered.setdefault("concurrency", {})
        concurrency["runs"] = self.run_concurrency()
        pools = concurrency.setdefault("pools", {})
        pools["default_limit"] = self.workers
        return rendered


def plan_from_environment(config_path: str | os.PathLike | None = None) -> WorkerPlan:
    """MEDIA_CRAWLER_WORKERS wins; else `workers:` of the sources file; else one worker.

    Used while the code location loads, so an unreadable sources file means
    one worker rather than a code location that fails to load.
    """
    from media_crawler.environment import default_config_path, workers_override

    override = workers_override()
    if override:
        return WorkerPlan(int(override))
    import yaml  # here, not at the top: fetch-urls imports this module and never reads YAML


    path = Path(config_path) if config_path else default_config_path()
    try:
        raw = yaml.safe_load(path.read_text()) or {}
        return WorkerPlan(int(raw.get("workers", 1)))
    except (OSError, yaml.YAMLError, AttributeError, TypeError, ValueError):
        return WorkerPlan(1)


def render_instance_yaml(template: Path, plan: WorkerPlan) -> str:
    """The template's instance settings with the plan's run limits, as YAML text."""
    import yaml

    instance = yaml.safe_load(template.read_text()) or {}
    body = yaml.safe_dump(plan.apply_to_instance(instance), sort_keys=False)
    return f"{RENDERED_MARKER} for workers: {plan.workers} from {template.name}; edit the template, not this file.\n{body}"


def main(argv: list[str] | None = None) -> int:
    from media_crawler.dagster_home import INSTANCE_TEMPLATE

    parser = argparse.ArgumentParser(prog="python -m media_crawler.deploy.workers",
                                     description="Print dagster.yaml for a number of workers.")
    parser.add_argument("--workers", type=int, help="number of workers (default: `workers:` of --config)")
    parser.add_argument("--config", help="sources.yaml to read `workers:` from")
    parser.add_argument("--template", type=Path, default=INSTANCE_TEMPLATE,
                        help="instance template (default: the embedded SQLite one; production: deploy/dagster.postgres.yaml)")
    args = parser.parse_args(argv)
    plan = WorkerPlan(args.workers) if args.workers else plan_from_environment(args.config)
    sys.stdout.write(render_instance_yaml(args.template, plan))
    return 0


if __name__ == "__main__":
    sys.exit(main())

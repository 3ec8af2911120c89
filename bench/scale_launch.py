"""How bench/scale.py's production rows put their runs on the daemon's queue.

Ranged (the default since issue 28): as the daily schedule and the sensors do, one run per
platform x day x `partitions.shards_per_run` consecutive shards. The RunRequests come from
the product's own `ranged_run_requests` (defs/jobs.py), and each is submitted the way
`dagster job launch` submits a run (its `_create_run`, then `instance.submit_run`), from one
opened workspace for all of them rather than one CLI process per run.

Per partition (`--per-partition`, the way SCALE.md's rows before issue 28 were measured):
`dagster job backfill`, one run per partition.

Both return the runs' tags or ids; a run's partitions are read back from its tags by
`partitions_of_run` (shards.py), so a row counts coverage per partition either way.
"""
from __future__ import annotations

import os
import subprocess
from contextlib import contextmanager
from pathlib import Path


def ranged_run_tags(config_path: Path, days: list[str]) -> list[dict[str, str]]:
    """The tags of the runs the daily schedule would request for `days`, every shard that holds
    a source: range tags and the platform tag, or a single partition's tag and platform tag
    (Dagster adds those from the job's partitioned config for a RunRequest's partition_key,
    not for a run submitted with tags, so they are spelled out here from the product's helpers)."""
    from media_crawler.config import load_config
    from media_crawler.defs.jobs import platform_tags, ranged_run_requests
    from media_crawler.shards import PARTITION_TAG

    config = load_config(config_path)
    holding = config.layout.group(source.key for source in config.sources)
    runs = []
    for day in days:
        for request in ranged_run_requests(config.layout, day, holding, holding, lambda _shards: None):
            if request.partition_key:
                runs.append({PARTITION_TAG: str(request.partition_key), **platform_tags(request.partition_key)})
            else:
                runs.append(dict(request.tags))
    return runs


def submit_runs(dagster_home: Path, workspace: Path, job_name: str, runs_tags: list[dict[str, str]],
                env: dict[str, str]) -> list[str]:
    """Submit one run of `job_name` per tag set to the instance at `dagster_home` (queued for
    the daemon), as `dagster job launch -w workspace -j job_name --tags ...` does."""
    from dagster import DagsterInstance
    from dagster._cli.job import _create_run
    from dagster._cli.workspace.cli_target import (WorkspaceOpts, get_code_location_from_workspace,
                                                   get_remote_job_from_remote_repo,
                                                   get_remote_repository_from_code_location,
                                                   get_workspace_from_cli_opts)
    from dagster.version import __version__

    run_ids = []
    with _environment(env), DagsterInstance.from_config(str(dagster_home)) as instance, \
            get_workspace_from_cli_opts(instance, version=__version__,
                                        workspace_opts=WorkspaceOpts(workspace=(str(workspace),))) as context:
        location = get_code_location_from_workspace(context, None)
        repo = get_remote_repository_from_code_location(location, None)
        job = get_remote_job_from_remote_repo(repo, job_name)
        for tags in runs_tags:
            run = _create_run(instance=instance, code_location=location, remote_repo=repo, remote_job=job,
                              run_config={}, tags=tags, op_selection=None, run_id=None)
            instance.submit_run(run.run_id, context)
            run_ids.append(run.run_id)
    return run_ids


def backfill_per_partition(workspace: Path, job_name: str, partitions: list[str], env: dict[str, str]) -> None:
    """`dagster job backfill`: one run per partition (the rows measured before issue 28)."""
    from bench.instruments import BIN

    done = subprocess.run([str(BIN / "dagster"), "job", "backfill", "-w", str(workspace), "-j", job_name,
                           "--partitions", ",".join(partitions), "--noprompt"],
                          env=env, timeout=600, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr[-3000:])


@contextmanager
def _environment(env: dict[str, str]):
    """The deployment's environment for this process while it loads the workspace (a
    `python_module` workspace starts a code server that inherits it)."""
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)

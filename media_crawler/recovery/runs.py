"""Dagster's side of a crash: runs left STARTED by a dead process, and what to re-run.

A run launched by the daemon executes in a process the code server started;
when that process is SIGKILLed, the code server notices and fails the run
itself (checked with Dagster 1.13: "Run execution process ... was terminated
by signal 9"), and run retries take over. A run executed in a command's own
process (`media-crawler crawl`, `dagster asset materialize`) has nobody
watching: SIGKILLed, it never writes its end and stays STARTED, looks alive
in the UI and blocks `rerun-failed`. Run monitoring cannot help: the default
run launcher offers no health check, so monitoring ends such a run only after
max_runtime_seconds. So every run records the process that executes it
(PROCESS_TAG: host/pid/start, see liveness.py), and whoever comes next on the
same host (a restarted crawl, `rerun-failed`, the unfinished-partitions
sensor) marks the run failed once that process is gone:
`instance.report_run_failed`, reason UNEXPECTED_TERMINATION, as Dagster does
for a crashed run worker. Runs on other hosts are left to run monitoring.
"""
from __future__ import annotations

import multiprocessing
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from dagster import DagsterInstance, DagsterRun, DagsterRunStatus, RunsFilter

from media_crawler.pipeline.liveness import is_dead, process_token
from media_crawler.shards import PARTITION_TAG, partitions_of_run

PROCESS_TAG = "media_crawler/process"
COMMITTED_ASSET = "committed_media"  # a partition is done when this, the last stage, materialized it
IN_FLIGHT = (DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING,
             DagsterRunStatus.STARTED)
# Executors whose steps run in the run worker itself, or in its child processes:
# only there does "this process, or its parent" name the run's process.
_IN_PROCESS_EXECUTORS = {"in_process", "execute_in_process_executor"}
_MULTIPROCESS_EXECUTORS = {"multiprocess", "multi_or_in_process_executor"}


def process_tags() -> dict[str, str]:
    """Tags for a run this process executes in-process (materialize())."""
    return {PROCESS_TAG: process_token()}


def record_run_process(context) -> None:
    """From inside a step: tag the run with the process that executes it (the run
    worker), if the stored run has no such tag yet. Left untagged when the
    executor runs steps elsewhere (Celery) or the run worker cannot be named."""
    pid = _run_worker_pid(context)
    if pid is None:
        return
    # The stored run, not context.run: a multiprocess step gets the run as it was when the run began.
    stored = context.instance.get_run_by_id(context.run_id)
    if stored is None or stored.tags.get(PROCESS_TAG):
        return
    token = process_token(pid)
    if is_dead(token):
        return  # the run worker died while this step was starting: nothing alive to record
    context.instance.add_run_tags(context.run_id, {PROCESS_TAG: token})


def _run_worker_pid(context) -> int | None:
    """The run worker's pid as seen from a step: this process for in-process
    execution; for multiprocess execution the parent of this step process (with
    the default spawn start method; a forkserver's children have the server as parent)."""
    executor = context.job_def.executor_def.name
    config = (context.run.run_config.get("execution") or {}).get("config") or {}
    if executor in _IN_PROCESS_EXECUTORS or (executor == "multi_or_in_process_executor" and "in_process" in config):
        return os.getpid()
    if executor not in _MULTIPROCESS_EXECUTORS:
        return None
    start_method = (config.get("multiprocess") or config).get("start_method") or {}
    parent = multiprocessing.parent_process()
    return parent.pid if parent is not None and "forkserver" not in start_method else None


def fail_dead_runs(instance: DagsterInstance) -> list[DagsterRun]:
    """Mark failed every STARTING/STARTED run whose recorded process is gone; returns them."""
    from media_crawler.store.dagster_private import unexpected_termination

    failed = []
    records = instance.get_run_records(RunsFilter(statuses=[DagsterRunStatus.STARTING, DagsterRunStatus.STARTED]))
    for record in records:
        run = record.dagster_run
        token = run.tags.get(PROCESS_TAG)
        if is_dead(token) is not True:
            continue
        instance.report_run_failed(
            run, message=f"media-crawler: the process that ran this run ({token}) is gone (killed or crashed); "
                         "marked failed so the partition can be re-run",
            job_failure_data=unexpected_termination())
        failed.append(run)
    return failed


def in_flight_partitions(instance: DagsterInstance, shard_order: Sequence[str] | None = None) -> set[str]:
    """Partitions with a run queued or running: never start a second one beside it.
    A run of a range of partitions holds every partition of the range (`shard_order`: the
    layout's shard keys, for a range launched across platforms: shards.py partitions_of_run)."""
    records = instance.get_run_records(RunsFilter(statuses=list(IN_FLIGHT)))
    return {key for record in records for key in partitions_of_run(record.dagster_run.tags, shard_order)}


@dataclass(frozen=True)
class FailedPartition:
    partition: str  # Dagster's key, "day|shard"
    run_id: str  # the failed run that named it


def failed_partitions(instance: DagsterInstance, since: datetime | None = None,
                      shard_order: Sequence[str] | None = None) -> list[FailedPartition]:
    """Partitions whose latest run failed (runs updated after `since`).

    A partition that failed and then succeeded, or is running again, is not
    listed: the latest run is the one that counts. A failed run of several
    partitions counts as failed only for those whose committed_media it did not
    materialize (a ranged step fails only its failed keys: defs/partition_range.py).
    """
    latest: dict[str, DagsterRun] = {}
    # Newest first: the first run met for a partition is its latest (a later run is updated later too).
    for record in instance.get_run_records(RunsFilter(updated_after=since)):
        for key in partitions_of_run(record.dagster_run.tags, shard_order):
            latest.setdefault(key, record.dagster_run)
    found: dict[str, FailedPartition] = {}
    committed_by_run: dict[str, set[str]] = {}
    for key, run in latest.items():
        if run.status != DagsterRunStatus.FAILURE:
            continue
        if run.run_id not in committed_by_run:
            committed_by_run[run.run_id] = _committed_in_run(instance, run)
        if key not in committed_by_run[run.run_id]:
            found[key] = FailedPartition(key, run.run_id)
    return sorted(found.values(), key=lambda item: item.partition)


def _committed_in_run(instance: DagsterInstance, run: DagsterRun) -> set[str]:
    """The partitions a failed ranged run still committed (none for a run of one partition: it failed)."""
    if run.tags.get(PARTITION_TAG):
        return set()
    from dagster import DagsterEventType

    records = instance.get_records_for_run(run.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION).records
    return {str(record.event_log_entry.dagster_event.partition) for record in records
            if record.event_log_entry.dagster_event.asset_key.to_user_string() == COMMITTED_ASSET}

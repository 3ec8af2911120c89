"""Dagster's side of a crash: runs left STARTED by a dead process, and what to re-run.

A SIGKILLed `media-crawler crawl` (or `dagster asset materialize`) never
writes its run's end: the run stays STARTED, looks alive in the UI, and
counts against concurrency limits. Run monitoring cannot help here: the
default run launcher offers no health check, so monitoring only ends such a
run after max_runtime_seconds. So every run records the process that
executes it (PROCESS_TAG: host/pid/start, see liveness.py), and whoever
comes next on the same host (a restarted crawl, `rerun-failed`, the
unfinished-partitions sensor) marks the run failed once that process is gone:
`instance.report_run_failed`, reason UNEXPECTED_TERMINATION, so Dagster's run
retries treat it like a crashed run worker. Runs on other hosts are left to
run monitoring.
"""
from __future__ import annotations

import multiprocessing
from dataclasses import dataclass
from datetime import datetime

from dagster import DagsterInstance, DagsterRun, DagsterRunStatus, RunsFilter

from media_crawler.recovery.liveness import is_dead, process_token

PROCESS_TAG = "media_crawler/process"
PARTITION_TAG = "dagster/partition"
IN_FLIGHT = (DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING,
             DagsterRunStatus.STARTED)
# Executors whose steps run in the run worker or in its child processes: only
# there does "the step's process (or its parent)" name the run's process.
_LOCAL_EXECUTORS = {"in_process", "multiprocess", "multi_or_in_process_executor", "execute_in_process_executor"}


def process_tags() -> dict[str, str]:
    """Tags for a run this process executes in-process (materialize())."""
    return {PROCESS_TAG: process_token()}


def record_run_process(context) -> None:
    """From inside a step: tag the run with the process that executes it, if untagged.

    In-process steps run in the run worker itself; multiprocess steps run in
    its children, so the parent is the run worker. Other executors (Celery)
    run steps elsewhere and are left untagged.
    """
    if context.run.tags.get(PROCESS_TAG) or context.job_def.executor_def.name not in _LOCAL_EXECUTORS:
        return
    parent = multiprocessing.parent_process()
    context.instance.add_run_tags(context.run_id, {PROCESS_TAG: process_token(parent.pid if parent else None)})


def fail_dead_runs(instance: DagsterInstance) -> list[DagsterRun]:
    """Mark failed every STARTING/STARTED run whose recorded process is gone; returns them."""
    from dagster._core.events import JobFailureData, RunFailureReason

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
            job_failure_data=JobFailureData(error=None, failure_reason=RunFailureReason.UNEXPECTED_TERMINATION))
        failed.append(run)
    return failed


def latest_run(instance: DagsterInstance, partition: str) -> DagsterRun | None:
    records = instance.get_run_records(RunsFilter(tags={PARTITION_TAG: partition}), limit=1)
    return records[0].dagster_run if records else None


def in_flight_partitions(instance: DagsterInstance) -> set[str]:
    """Partitions with a run queued or running: never start a second one beside it."""
    records = instance.get_run_records(RunsFilter(statuses=list(IN_FLIGHT)))
    return {record.dagster_run.tags[PARTITION_TAG] for record in records if PARTITION_TAG in record.dagster_run.tags}


@dataclass(frozen=True)
class FailedPartition:
    partition: str  # Dagster's key, "day|source"
    run_id: str  # the failed run that named it


def failed_partitions(instance: DagsterInstance, since: datetime | None = None) -> list[FailedPartition]:
    """Partitions whose latest run failed (updated after `since`).

    A partition that failed and then succeeded, or is running again, is not
    listed: the latest run is the one that counts.
    """
    records = instance.get_run_records(RunsFilter(statuses=[DagsterRunStatus.FAILURE], updated_after=since))
    found: dict[str, FailedPartition] = {}
    for record in records:
        partition = record.dagster_run.tags.get(PARTITION_TAG)
        if not partition or partition in found:
            continue
        latest = latest_run(instance, partition)
        if latest is not None and latest.status == DagsterRunStatus.FAILURE:
            found[partition] = FailedPartition(partition, latest.run_id)
    return sorted(found.values(), key=lambda item: item.partition)

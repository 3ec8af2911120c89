"""`crawl`'s partitions, up to N at once: one Dagster run per partition, each in one process.

A partition's steps are a chain, so they run in one process (the in-process
executor); partitions are independent, so `--workers N` runs N of them at once
in a pool of worker processes. The workers share what must be shared through
the ledger and Dagster's storage, not through this process: the platforms' rate
budgets are rows of the ledger (download/ratebudget.py), and every run is
recorded in the instance DAGSTER_HOME names. The pool's processes start from a
forkserver that imported Dagster once (spawn where there is none), so a worker
costs a fork, not Dagster's 1-2 s import; nothing of this process (its SQLite
connections, its threads) is inherited.

Dagster's console logger prints every failed step's whole "Stack Trace:" on
stderr; a crawl prints each partition's outcome in one line instead, so the
console logger is raised to CRITICAL (the trace stays in Dagster's event log,
and MEDIA_CRAWLER_DEBUG=1 brings it back).
"""
from __future__ import annotations

import multiprocessing
import warnings
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from media_crawler.observe.traces import debug_enabled, failure_message
from media_crawler.scrub import excerpt

QUIET_CONSOLE = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


@dataclass(frozen=True)
class PartitionJob:
    shard: str
    day: str
    sources: tuple[str, ...]  # the source keys the shard holds


@dataclass
class PartitionOutcome:
    shard: str
    day: str
    success: bool
    run_id: str
    error: str = ""
    sources: tuple[str, ...] = ()  # the source keys the shard holds
    empty_sources: tuple[str, ...] = ()  # of those, the ones that published nothing on the day
    committed_bytes: int = 0


class PartitionRunner:
    """Runs one partition at a time in this process: the crawl's assets, resources and instance, built once."""

    def __init__(self, config_path: str | Path, instance, raise_on_error: bool = False) -> None:
        from media_crawler.config import load_config
        from media_crawler.defs.resources import crawl_resources
        from media_crawler.definitions import crawl_assets_for

        self.config_path = str(Path(config_path).resolve())
        self.assets = crawl_assets_for(load_config(self.config_path))
        self.resources = crawl_resources(self.config_path)
        self.instance = instance
        self.raise_on_error = raise_on_error

    def run(self, job: PartitionJob) -> PartitionOutcome:
        from dagster import materialize

        from media_crawler.defs.partitions import partition_key
        from media_crawler.recovery.runs import process_tags

        result = materialize(self.assets, partition_key=partition_key(job.shard, job.day), instance=self.instance,
                             resources=self.resources, raise_on_error=self.raise_on_error,
                             run_config=None if debug_enabled() else QUIET_CONSOLE,
                             tags={"media_crawler/shard": job.shard, "media_crawler/day": job.day, **process_tags()})
        error = ""
        if not result.success:
            failures = [event for event in result.all_events if event.is_step_failure]
            error = "; ".join(excerpt(failure_message(str(event.step_failure_data.error.message)), 300)
                              for event in failures)
        return PartitionOutcome(job.shard, job.day, result.success, result.run_id, error, job.sources,
                                _empty_sources(result), _committed_bytes(result))


def run_partitions(config_path: str | Path, instance, jobs: Sequence[PartitionJob], workers: int,
                   on_done: Callable[[PartitionOutcome], None], raise_on_error: bool = False) -> list[PartitionOutcome]:
    """Every job's outcome, in the jobs' order; `on_done` hears of each as it finishes.
    One partition or one worker (or raise_on_error, for tests): one after another in this
    process, on `instance`. Otherwise the pool's processes open the instance DAGSTER_HOME
    names, which must be `instance` (crawl sees to it)."""
    if workers <= 1 or len(jobs) <= 1 or raise_on_error:
        runner = PartitionRunner(config_path, instance, raise_on_error)
        outcomes = []
        for job in jobs:
            outcomes.append(runner.run(job))
            on_done(outcomes[-1])
        return outcomes
    outcomes_by_job: dict[int, PartitionOutcome] = {}
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=_pool_context(),
                             initializer=_start_worker, initargs=(str(config_path),)) as pool:
        pending = {pool.submit(_run_in_worker, job): index for index, job in enumerate(jobs)}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                index = pending.pop(future)
                outcomes_by_job[index] = future.result()
                on_done(outcomes_by_job[index])
    return [outcomes_by_job[index] for index in range(len(jobs))]


def _pool_context():
    """A forkserver that imported Dagster and the definitions once; spawn where there is no forkserver."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["dagster", "media_crawler.definitions", __name__])
    return context


_WORKER: PartitionRunner | None = None


def _start_worker(config_path: str) -> None:
    """A pool process: logging as the crawl's, the instance DAGSTER_HOME names (set by the crawl)."""
    from dagster import DagsterInstance

    from media_crawler.observe.logging import configure

    global _WORKER
    # As cli.main does in the crawl's own process: Dagster flags dagster.yaml's python_logs as beta on every run.
    warnings.filterwarnings("ignore", message=".*yaml-defined logging configuration.*")
    configure()
    _WORKER = PartitionRunner(config_path, DagsterInstance.get())


def _run_in_worker(job: PartitionJob) -> PartitionOutcome:
    assert _WORKER is not None, "the pool's initializer builds the runner"
    return _WORKER.run(job)


def _empty_sources(result) -> tuple[str, ...]:
    """The sources media_records found nothing published for (defs/assets.py EMPTY_SOURCES_KEY)."""
    from media_crawler.defs.assets import EMPTY_SOURCES_KEY

    keys: list[str] = []
    for materialization in result.asset_materializations_for_node("media_records"):
        value = materialization.metadata.get(EMPTY_SOURCES_KEY)
        keys.extend(str(getattr(value, "value", value) or "").split())
    return tuple(keys)


def _committed_bytes(result) -> int:
    """Bytes the partition's committed_media materialization reports (0 when it did not materialize)."""
    total = 0
    for materialization in result.asset_materializations_for_node("committed_media"):
        value = materialization.metadata.get("bytes")
        total += int(getattr(value, "value", value) or 0)
    return total

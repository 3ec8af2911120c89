"""`crawl`'s runs, up to N at once: one Dagster run per few partitions, each in one process.

A run carries consecutive shards of one platform and day (`partitions.shards_per_run`,
shards.py `run_ranges`): Dagster's fixed cost of a run is paid once for all of them,
and each partition still succeeds or fails on its own (defs/partition_range.py). A
run's steps are a chain, so they run in one process (the in-process executor); runs
are independent, so `--workers N` runs N of them at once in a pool of worker processes. The workers share what must be shared through
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


@dataclass(frozen=True)
class RunJob:
    """One Dagster run: consecutive shards of one platform on one day (one, or a range)."""

    day: str
    partitions: tuple[PartitionJob, ...]

    @property
    def shards(self) -> tuple[str, ...]:
        return tuple(partition.shard for partition in self.partitions)


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

    def run(self, job: RunJob) -> list[PartitionOutcome]:
        """The run's outcome for each of its partitions, in the job's order."""
        from dagster import materialize

        from media_crawler.defs.partitions import partition_key, partition_string
        from media_crawler.recovery.runs import process_tags
        from media_crawler.shards import range_tags

        if len(job.partitions) == 1:
            [only] = job.partitions
            which = {"partition_key": partition_key(only.shard, job.day)}
            tags = {"media_crawler/shard": only.shard}
        else:  # a range: Dagster gives the steps context.partition_keys
            which = {}
            tags = range_tags(job.day, job.shards)
        result = materialize(self.assets, instance=self.instance, resources=self.resources,
                             raise_on_error=self.raise_on_error, run_config=None if debug_enabled() else QUIET_CONSOLE,
                             tags={**tags, "media_crawler/day": job.day, **process_tags()}, **which)
        committed = _committed_partitions(result)
        errors, whole = _failure_lines(result)
        outcomes = []
        for partition in job.partitions:
            key = partition_string(partition.shard, job.day)
            success = result.success or key in committed
            error = "" if success else errors.get(key, whole)
            outcomes.append(PartitionOutcome(partition.shard, job.day, success, result.run_id, error, partition.sources,
                                             _empty_sources(result, key), _committed_bytes(result, key)))
        return outcomes


def run_partitions(config_path: str | Path, instance, jobs: Sequence[RunJob], workers: int,
                   on_done: Callable[[PartitionOutcome], None], raise_on_error: bool = False) -> list[PartitionOutcome]:
    """Every partition's outcome, in the jobs' order; `on_done` hears of each as its run finishes.
    One run or one worker (or raise_on_error, for tests): one after another in this
    process, on `instance`. Otherwise the pool's processes open the instance DAGSTER_HOME
    names, which must be `instance` (crawl sees to it)."""
    if workers <= 1 or len(jobs) <= 1 or raise_on_error:
        runner = PartitionRunner(config_path, instance, raise_on_error)
        outcomes = []
        for job in jobs:
            for outcome in runner.run(job):
                outcomes.append(outcome)
                on_done(outcome)
        return outcomes
    outcomes_by_job: dict[int, list[PartitionOutcome]] = {}
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=_pool_context(),
                             initializer=_start_worker, initargs=(str(config_path),)) as pool:
        pending = {pool.submit(_run_in_worker, job): index for index, job in enumerate(jobs)}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                index = pending.pop(future)
                outcomes_by_job[index] = future.result()
                for outcome in outcomes_by_job[index]:
                    on_done(outcome)
    return [outcome for index in range(len(jobs)) for outcome in outcomes_by_job[index]]


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


def _run_in_worker(job: RunJob) -> list[PartitionOutcome]:
    assert _WORKER is not None, "the pool's initializer builds the runner"
    return _WORKER.run(job)


def _materializations(result, node: str, key: str) -> list:
    return [m for m in result.asset_materializations_for_node(node) if str(m.partition) == key]


def _committed_partitions(result) -> set[str]:
    """The partitions whose committed_media materialized in this run: the ones that succeeded."""
    return {str(m.partition) for m in result.asset_materializations_for_node("committed_media")}


def _failure_lines(result) -> tuple[dict[str, str], str]:
    """({partition: its failure line} as a ranged step names them, the run's failure text for the rest)."""
    from media_crawler.defs.partition_range import FAILED_PARTITIONS_KEY

    by_partition: dict[str, str] = {}
    whole = []
    for event in result.all_events:
        if not event.is_step_failure:
            continue
        data = event.step_failure_data
        whole.append(excerpt(failure_message(str(data.error.message)), 300) if data.error else "")
        metadata = data.user_failure_data.metadata if data.user_failure_data else {}
        lines = metadata.get(FAILED_PARTITIONS_KEY)
        for key, line in (getattr(lines, "value", None) or {}).items():
            by_partition.setdefault(key, excerpt(line, 300))
    return by_partition, "; ".join(line for line in whole if line)


def _empty_sources(result, key: str) -> tuple[str, ...]:
    """The sources media_records found nothing published for (defs/assets.py EMPTY_SOURCES_KEY)."""
    from media_crawler.defs.assets import EMPTY_SOURCES_KEY

    keys: list[str] = []
    for materialization in _materializations(result, "media_records", key):
        value = materialization.metadata.get(EMPTY_SOURCES_KEY)
        keys.extend(str(getattr(value, "value", value) or "").split())
    return tuple(keys)


def _committed_bytes(result, key: str) -> int:
    """Bytes the partition's run stored: committed_media's `bytes`, plus what its download step
    committed itself (an object store: pipeline/settle_in_place.py); 0 when nothing materialized."""
    from media_crawler.pipeline.report import BYTES_COMMITTED

    total = 0
    for asset, name in (("committed_media", "bytes"), ("media_downloads", BYTES_COMMITTED)):
        for materialization in _materializations(result, asset, key):
            value = materialization.metadata.get(name)
            total += int(getattr(value, "value", value) or 0)
    return total

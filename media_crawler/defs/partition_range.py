"""A step over the partitions of its run, one after another, each failing on its own.

A run may carry several partitions (one day, one platform, consecutive shards:
`partitions.shards_per_run`, docs/SHARDS.md), so Dagster's fixed cost of a run
(2.5-4 s before our code starts) is paid once for all of them. A stage then
reads `context.partition_keys` and works each partition in turn.

What a ranged step must keep from one partition per run:
- a failing partition names itself (its shard and day lead its failure line) and
  fails only its own key. Dagster marks a key red when its run failed and the key
  has no materialization after the run planned it (checked in Dagster 1.13,
  storage/partition_status_cache.py); so the step yields one AssetMaterialization
  per healthy key and then raises: the healthy keys are green, the others red;
- per-partition metadata: `add_asset_metadata(..., partition_key=k)` when every key
  succeeded (the one MaterializeResult becomes one materialization per key), the
  per-key AssetMaterialization's own metadata otherwise.
A run of one partition behaves as before: an error is raised where it happens.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Generic, Iterable, Iterator, TypeVar

from dagster import AssetExecutionContext, AssetMaterialization, Failure, MaterializeResult, MetadataValue

from media_crawler.defs.failing import failing_at_once
from media_crawler.defs.partitions import split_partition_key
from media_crawler.defs.resources import PlatformsResource
from media_crawler.models import DayWindow, Source
from media_crawler.observe.events import correlation
from media_crawler.observe.logging import ensure_configured
from media_crawler.pipeline.credentials import refuse_unset_credentials
from media_crawler.pipeline.layout import check_layout
from media_crawler.pipeline.runtime import Runtime
from media_crawler.recovery.runs import record_run_process
from media_crawler.scrub import excerpt, scrub_text

T = TypeVar("T")
FAILED_PARTITIONS_KEY = "failed_partitions"  # a ranged step failure's metadata: {partition: one line}


@dataclass(frozen=True)
class Scope:
    """What one step works on for one partition of its run."""

    runtime: Runtime
    shard: str
    sources: list[Source]
    window: DayWindow
    key: str  # Dagster's partition key, 'day|shard'


@dataclass
class RangeOutcome(Generic[T]):
    """A step's work over its run's partitions: what each healthy partition gave, and each error."""

    done: dict[str, tuple[Scope, T]] = field(default_factory=dict)
    errors: dict[str, Exception] = field(default_factory=dict)


def is_ranged(context: AssetExecutionContext) -> bool:
    return len(context.partition_keys) > 1


def each_partition(context: AssetExecutionContext, platforms: PlatformsResource,
                   work: Callable[[Scope], T]) -> RangeOutcome[T]:
    """`work` for every partition of the run, in key order. In a ranged run an error of one
    partition is kept and the next partition is worked; in a run of one it is raised."""
    ensure_configured()  # item events as JSON lines on stdout, not in Dagster's event log
    record_run_process(context)  # so a restart can tell this run died with its process (recovery/runs.py)
    ranged = is_ranged(context)
    with failing_at_once():
        runtime = platforms.runtime()
    outcome: RangeOutcome[T] = RangeOutcome()
    for key in context.partition_keys:
        shard, window = split_partition_key(key)
        try:
            with failing_at_once():
                check_layout(runtime.ledger, runtime.config, instance=context.instance, shard=shard)
                sources = runtime.config.sources_in(shard)
                with correlation(run_id=context.run_id, partition=str(key), step=context.asset_key.to_user_string()):
                    refuse_unset_credentials(runtime, sources, window, run_id=context.run_id)  # before any request
                    scope = Scope(runtime, shard, sources, window, str(key))
                    outcome.done[str(key)] = (scope, work(scope))
        except Exception as error:  # noqa: BLE001 - kept for its partition, raised after the others (range_failure)
            if not ranged:
                raise
            outcome.errors[str(key)] = error
    return outcome


def materialize_each(context: AssetExecutionContext, metadata_by_key: dict[str, dict],
                     failure: Failure | None = None, then: Iterable = ()) -> Iterator:
    """The step's materializations, one per healthy partition with its own metadata, and
    the events of `then` (its check results: a failing step still reports what its checks
    found); then `failure`, if any partition failed (it names each; only those keys turn red)."""
    if failure is None:
        for key, metadata in metadata_by_key.items():
            context.add_asset_metadata(metadata, partition_key=key)
        yield MaterializeResult()
        yield from then
        return
    for key, metadata in metadata_by_key.items():
        yield AssetMaterialization(asset_key=context.asset_key, partition=key, metadata=metadata)
    yield from then
    raise failure


def errors_failure(errors: dict[str, Exception]) -> Failure | None:
    """The Failure of a ranged step whose partitions raised `errors` (None: none did)."""
    return range_failure(errors) if errors else None


def partition_label(key: str) -> str:
    """'bilibili-s03 2026-11-25': how a failure line names its partition."""
    shard, window = split_partition_key(key)
    return f"{shard} {window.day.isoformat()}"


def error_line(error: str | Exception) -> str:
    if isinstance(error, str):
        return error
    if isinstance(error, Failure):
        return error.description or type(error).__name__
    return f"{type(error).__name__}: {error}"


def range_failure(failures: dict[str, str | Exception], metadata: dict | None = None) -> Failure:
    """One Failure for the failed partitions of a ranged step: a line each, led by the
    partition, and the lines by key in metadata (`crawl` reads them per partition).
    Retries stay allowed unless every error refuses them (a configuration or auth error)."""
    lines = {key: scrub_text(excerpt(_named(key, error_line(error)), 2000)) for key, error in sorted(failures.items())}
    allow_retries = any(not (isinstance(error, str) or (isinstance(error, Failure) and not error.allow_retries))
                        for error in failures.values())
    failure = Failure(description=" | ".join(lines.values()), allow_retries=allow_retries,
                      metadata={FAILED_PARTITIONS_KEY: MetadataValue.json(lines), **(metadata or {})})
    # The first unforeseen error's trace stays in the event log (the step failure's cause).
    failure.__cause__ = next((error for error in failures.values() if isinstance(error, Exception)), None)
    return failure


def _named(key: str, line: str) -> str:
    label = partition_label(key)
    return line if line.startswith(label) else f"{label}: {line}"

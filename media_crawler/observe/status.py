"""The status document: backlog, why items wait, throughput, platform health, uncertain
leases, stage delays, Dagster's run queue and step start delays, the API answers kept, disk.

One dict, JSON-ready (timestamps as UTC ISO strings), built from store/reports/
(and observe/dagster_runs.py when a Dagster instance is given);
`media-crawler status` prints it as JSON or as text.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from media_crawler.config import CrawlConfig
from media_crawler.platforms.registry import names as platform_names
from media_crawler.observe import wait_summary
from media_crawler.store.reports import counts, delays, platform_signals, waiting
from media_crawler.timestamps import utc_timestamp
from media_crawler.scrub import excerpt
from media_crawler.store.database import Engine
from media_crawler.store.urls import display_url


def disk_usage(store_root: Path, min_free_bytes: int) -> dict[str, Any]:
    """Free space where the store lives (its nearest existing folder, if it is not created yet)."""
    path = Path(store_root)
    while not path.exists() and path != path.parent:
        path = path.parent
    usage = shutil.disk_usage(path)
    return {"path": str(store_root), "free_bytes": usage.free, "total_bytes": usage.total,
            "min_free_bytes": min_free_bytes, "below_minimum": usage.free < min_free_bytes}


def build_status(engine: Engine, config: CrawlConfig, now: float, *, instance=None,
                 dagster_absent: str = "no Dagster instance given") -> dict[str, Any]:
    """instance: a DagsterInstance whose run storage says which partitions have a run
    queued or in flight, and how long runs and steps waited to start; without one the
    document says why (`dagster_absent`) and ready items read `awaiting_run`."""
    by_state = counts.state_counts(engine)
    states: dict[str, int] = {}
    for (_platform, state), count in by_state.items():
        states[state] = states.get(state, 0) + count
    last_hour = counts.committed_totals(engine, since=now - counts.HOUR_S)
    items_1h = sum(entry["items"] for entry in last_hour.values())
    bytes_1h = sum(entry["bytes"] for entry in last_hour.values())
    health = platform_signals.platform_health(engine, now, platform_names())
    leases = counts.expired_leases(engine, now)
    feed_errors = counts.unresolved_feed_errors(engine)
    binding = platform_signals.binding_budgets(engine, now)
    dagster: dict[str, Any] = {"available": False, "reason": dagster_absent}
    view = None
    if instance is not None:
        from media_crawler.observe import dagster_runs

        try:
            view = dagster_runs.runs_in_flight(instance)
            dagster = dagster_runs.dagster_status(instance, now, view)
        except Exception as exc:  # run storage unreachable: the ledger's part still answers
            view, dagster = None, {"available": False, "reason": excerpt(f"{type(exc).__name__}: {exc}", 300)}
    # Per partition only where Dagster holds a run for one (refine_with_runs), else per platform and reason.
    days = wait_summary.partition_days(view.queued_partitions, view.running_partitions) if view else set()
    wait_rows = waiting.waiting(engine, now, binding, partitions=days)
    if days:
        wait_rows = wait_summary.refine_with_runs(wait_rows, view.queued_partitions, view.running_partitions,
                                                  shard_of=config.layout.shard_of)
    by_reason = wait_summary.summarize_waiting(wait_rows, now)
    for entry in by_reason.values():
        entry["oldest_since"] = utc_timestamp(entry["oldest_since"])
        for platform in entry["platforms"].values():
            platform["oldest_since"] = utc_timestamp(platform["oldest_since"])
    return {
        "generated_at": utc_timestamp(now),
        "ledger": display_url(config.ledger_url),
        "states": dict(sorted(states.items())),
        "backlog": counts.backlog(engine, now),
        "waiting": by_reason,
        "rate_budgets_binding": {name: _timestamps(entry, ("slowed_until",)) for name, entry in binding.items()},
        "throughput_1h": {"items_committed": items_1h, "bytes_committed": bytes_1h,
                          "items_per_min": round(items_1h / 60, 2), "bytes_per_s": round(bytes_1h / 3600),
                          "by_platform": last_hour},
        "platforms": {name: platform_signals.health_json(entry) for name, entry in health.items()},
        "uncertain": _timestamps(leases, ("oldest_expired_at",)),
        "feed_errors_unresolved": {f"{platform}/{error_class}": count
                                   for (platform, error_class), count in sorted(feed_errors.items())},
        "stage_delays_s": delays.stage_delays(engine, now),
        "stage_delay_window_s": delays.DELAY_WINDOW_S,
        "dagster": dagster,
        "api_answers_kept": counts.kept_answers(engine),
        "disk": _disk(config),
    }


def _disk(config: CrawlConfig) -> dict[str, Any]:
    """The local disk the crawl writes to. With a bucket as the store that is the staging
    folder alone (downloads before their upload): the bucket's own room is not ours to read."""
    disk = disk_usage(config.store_root, config.min_free_bytes)
    if config.store_url:
        disk.update(store=config.store_url, holds="staged downloads only; the blobs are in the bucket")
    return disk


def _timestamps(entry: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: (utc_timestamp(value) if key in keys and value is not None else value) for key, value in entry.items()}

"""The ledger's waits (store/reports/waiting.py) as `status` and `metrics` show them:
refined with the partitions Dagster holds a run for, and summed per reason."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from media_crawler.store import waits


def refine_with_runs(rows: list[dict[str, Any]], queued_partitions: set[str], running_partitions: set[str],
                     shard_of: Callable[[str], str] | None = None) -> list[dict[str, Any]]:
    """`awaiting_run` rows whose partition ('day|shard', Dagster's key; shard_of maps a
    row's source key to its shard) has a run queued become `run_queued`; with a run
    in flight, `step_pending` (rows read without their partition stay as they are)."""
    refined = []
    for row in rows:
        if row["reason"] == waits.AWAITING_RUN and row["source_key"] is not None:
            shard = shard_of(row["source_key"]) if shard_of else row["source_key"]
            partition = f"{row['day']}|{shard}"
            if partition in running_partitions:
                row = {**row, "reason": waits.STEP_PENDING}
            elif partition in queued_partitions:
                row = {**row, "reason": waits.RUN_QUEUED}
        refined.append(row)
    return refined


def summarize_waiting(rows: list[dict[str, Any]], now: float) -> dict[str, dict[str, Any]]:
    """reason -> {count, oldest_age_s, oldest_since, platforms: {platform: {count, oldest_age_s,
    oldest_since, causes?, retry_after_s_max?}}}, reasons in waits.REASONS order."""
    summary: dict[str, dict[str, Any]] = {}
    for row in rows:
        entry = summary.setdefault(row["reason"], {"count": 0, "oldest_since": row["since"], "platforms": {}})
        entry["count"] += row["count"]
        entry["oldest_since"] = min(entry["oldest_since"], row["since"])
        platform = entry["platforms"].setdefault(row["platform"], {"count": 0, "oldest_since": row["since"]})
        platform["count"] += row["count"]
        platform["oldest_since"] = min(platform["oldest_since"], row["since"])
        if row["cause"]:
            causes = platform.setdefault("causes", {})
            causes[row["cause"]] = causes.get(row["cause"], 0) + row["count"]
        if row["retry_after_max"] is not None:
            platform["retry_after_s_max"] = max(platform.get("retry_after_s_max", 0.0), float(row["retry_after_max"]))
    ordered = {}
    for reason in [*waits.REASONS, *sorted(set(summary) - set(waits.REASONS))]:
        if reason not in summary:
            continue
        entry = summary[reason]
        entry["oldest_age_s"] = round(max(now - entry["oldest_since"], 0.0), 1)
        for platform in entry["platforms"].values():
            platform["oldest_age_s"] = round(max(now - platform["oldest_since"], 0.0), 1)
        entry["platforms"] = dict(sorted(entry["platforms"].items()))
        ordered[reason] = {"count": entry["count"], "oldest_age_s": entry["oldest_age_s"],
                           "oldest_since": entry["oldest_since"], "platforms": entry["platforms"]}
    return ordered


def partition_days(*partition_sets: Iterable[str]) -> set[str]:
    """The days of Dagster partition keys ('day|shard'): what `waiting(partitions=...)` reads per partition."""
    return {key.split("|", 1)[0] for keys in partition_sets for key in keys}

"""`media-crawler status [--json] [--config sources.yaml] [--no-dagster]`: is the crawler keeping up?

Backlog by state and age, why items wait (one reason each, per platform, with
the oldest age: store/waits.py), throughput over the last hour, per-platform
health (auth failed, rate limited, down or degraded: since when, while it lasts; an
incident that ended: since and until),
items leased by workers that no longer renew their lease ("uncertain"),
p50/p95 of each stage delay, Dagster's queued runs, run queue delay and step
start delay (from the run storage of the instance DAGSTER_HOME names, read with
SQL when it is SQLite or PostgreSQL: observe/dagster_runs.py; `--no-dagster`
skips them), and the free disk of the store.
"""
from __future__ import annotations

import argparse
import json
import sys
import time


# The console script ends the process after the report without the interpreter's
# teardown (cli.end_without_teardown: the ledger's connections are closed first):
# freeing every object the imports and the report left takes time and writes nothing.
EXIT_WITHOUT_TEARDOWN = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from media_crawler.observe.target import add_config_argument

    add_config_argument(parser)
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--no-dagster", action="store_true",
                        help="leave out Dagster's run queue and step start delays (no run storage read)")


def run(args: argparse.Namespace) -> int:
    from media_crawler.observe.read_from import read_from
    from media_crawler.observe.status import build_status
    from media_crawler.observe.target import observed_config
    from media_crawler.config import unset_credential_messages
    from media_crawler.store.ledger import Ledger

    config = observed_config(args.config)
    instance, absent = None, "--no-dagster"
    if not args.no_dagster:
        instance, absent = _dagster_instance()
    try:
        status = build_status(Ledger(config.ledger_url).engine, config, time.time(), instance=instance,
                              dagster_absent=absent or "")
        status["read_from"] = read_from(config, dagster_read=not args.no_dagster)
    finally:
        if instance is not None:
            instance.dispose()
    status["credentials_unset"] = unset_credential_messages(config)  # names, never values
    if args.json:
        json.dump(status, sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(status))
    return 0


def _dagster_instance():
    """(instance, None), or (None, why not): an instance that cannot be opened is a line of the status, not its end."""
    from media_crawler.observe.dagster_runs import instance_from_environment
    from media_crawler.scrub import excerpt

    try:
        return instance_from_environment()
    except Exception as exc:
        return None, excerpt(f"Dagster instance not readable: {type(exc).__name__}: {exc}", 300)


def render_text(status: dict) -> str:
    from media_crawler.observe.incident_text import platform_detail
    from media_crawler.observe.progress import clock_text, human_bytes

    lines = [f"status at {status['generated_at']}  ledger {status['ledger']}"]
    if status.get("read_from"):
        from media_crawler.observe.read_from import read_from_line

        lines.append(read_from_line(status["read_from"]))
    lines.append("states: " + (", ".join(f"{state}={count}" for state, count in status["states"].items()) or "empty"))
    lines.append("backlog (age in state):")
    for state, entry in status["backlog"].items():
        ages = ", ".join(f"{bucket}: {count}" for bucket, count in entry["ages"].items())
        due = f", {entry['due_now']} due now" if "due_now" in entry else ""
        lines.append(f"  {state:<12} {entry['count']:>7}  oldest {clock_text(entry['oldest_age_s'])}  ({ages}{due})")
    if not status["backlog"]:
        lines.append("  none")
    lines.append("waiting (reason: items, oldest; per platform):")
    for reason, entry in status.get("waiting", {}).items():
        platforms = "; ".join(_waiting_platform(name, item) for name, item in entry["platforms"].items())
        lines.append(f"  {reason:<16} {entry['count']:>7}  oldest {clock_text(entry['oldest_age_s'])}  ({platforms})")
    if not status.get("waiting"):
        lines.append("  nothing waits")
    rate = status["throughput_1h"]
    lines.append(f"last hour: {rate['items_committed']} items, {human_bytes(rate['bytes_committed'])} committed "
                 f"({rate['items_per_min']}/min, {human_bytes(rate['bytes_per_s'])}/s)")
    lines.append("platforms:")
    for name, health in status["platforms"].items():
        lines.append(f"  {name:<9} {health['status']:<13} {platform_detail(health)}".rstrip())
    if status.get("credentials_unset"):
        lines.append("credentials not set: " + "; ".join(status["credentials_unset"]))
    uncertain = status["uncertain"]
    lines.append(f"uncertain (lease expired, worker silent): {uncertain['count']}"
                 + (f", oldest expired {uncertain['oldest_expired_at']}, owners {_counts(uncertain['by_owner'], '{name} ({count})')}"
                    if uncertain["count"] else ""))
    if status["feed_errors_unresolved"]:
        # "facebook/auth" (platform/class) is the JSON key; a person reads "facebook auth: 100".
        failing = {key.replace("/", " ", 1): count for key, count in status["feed_errors_unresolved"].items()}
        lines.append(f"feed pages failing: {_counts(failing)}")
    lines.append(f"stage delays (last {status['stage_delay_window_s'] / 3600:.0f} h):")
    for name, delay in status["stage_delays_s"].items():
        if delay["count"]:
            lines.append(f"  {name:<10} p50 {_seconds(delay['p50'])}  p95 {_seconds(delay['p95'])}  "
                         f"max {_seconds(delay['max'])}  ({delay['count']} items)")
        else:
            lines.append(f"  {name:<10} no items")
    dagster = status.get("dagster") or {}
    if dagster.get("available"):
        queued = ", ".join(f"{name} {entry['count']} (oldest {clock_text(entry['oldest_age_s'])})"
                           for name, entry in dagster["runs_queued"].items()) or "none"
        delay = dagster["run_queue_delay_s"]
        lines.append(f"dagster: runs queued: {queued}; run queue delay p50 {_seconds(delay['p50'])} "
                     f"p95 {_seconds(delay['p95'])} max {_seconds(delay['max'])} ({delay['count']} runs)")
        for stage, steps in dagster["step_start_delay_s"].items():
            lines.append(f"  step start {stage:<9} p50 {_seconds(steps['p50'])}  p95 {_seconds(steps['p95'])}  "
                         f"max {_seconds(steps['max'])}  ({steps['count']} steps)")
    else:
        lines.append(f"dagster: not read ({dagster.get('reason') or 'no instance'})")
    kept = status.get("api_answers_kept") or {}
    if kept:
        lines.append("api answers kept: " + ", ".join(
            f"{name} {entry['answers']} ({human_bytes(entry['bytes'])})" for name, entry in sorted(kept.items())))
    disk = status["disk"]
    lines.append(f"disk: {human_bytes(disk['free_bytes'])} free of {human_bytes(disk['total_bytes'])} at {disk['path']}"
                 + (f" (staging only; blobs in {disk['store']})" if disk.get("store") else "")
                 + ("  BELOW min_free_bytes" if disk["below_minimum"] else ""))
    return "\n".join(lines) + "\n"


def _waiting_platform(name: str, item: dict) -> str:
    from media_crawler.observe.progress import clock_text

    text = f"{name} {item['count']}, oldest {clock_text(item['oldest_age_s'])}"
    if item.get("causes"):
        text += " [" + ", ".join(f"{cause} {count}" for cause, count in sorted(item["causes"].items())) + "]"
    if item.get("retry_after_s_max") is not None:
        text += f" Retry-After up to {item['retry_after_s_max']:g} s"
    return text


def _counts(counts: dict, shape: str = "{name}: {count}") -> str:
    """{name: count} as "name: count, ...": a dict's repr is not a sentence."""
    return ", ".join(shape.format(name=name, count=count) for name, count in sorted(counts.items()))


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.1f} s"

"""`media-crawler status [--json] [--config sources.yaml]`: is the crawler keeping up?

Backlog by state and age, throughput over the last hour, per-platform health
(rate limited since when, auth failures), items leased by workers that no
longer renew their lease ("uncertain"), p50/p95 of each stage delay, and the
free disk of the store.
"""
from __future__ import annotations

import argparse
import json
import sys
import time


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from media_crawler.observe.target import add_config_argument

    add_config_argument(parser)
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")


def run(args: argparse.Namespace) -> int:
    from media_crawler.observe.status import build_status
    from media_crawler.observe.target import observed_config
    from media_crawler.store.ledger import Ledger

    config = observed_config(args.config)
    status = build_status(Ledger(config.ledger_url).engine, config, time.time())
    if args.json:
        json.dump(status, sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(status))
    return 0


def render_text(status: dict) -> str:
    from media_crawler.observe.progress import clock_text, human_bytes

    lines = [f"status at {status['generated_at']}  ledger {status['ledger']}"]
    lines.append("states: " + (", ".join(f"{state}={count}" for state, count in status["states"].items()) or "empty"))
    lines.append("backlog (age in state):")
    for state, entry in status["backlog"].items():
        ages = ", ".join(f"{bucket}: {count}" for bucket, count in entry["ages"].items())
        due = f", {entry['due_now']} due now" if "due_now" in entry else ""
        lines.append(f"  {state:<12} {entry['count']:>7}  oldest {clock_text(entry['oldest_age_s'])}  ({ages}{due})")
    if not status["backlog"]:
        lines.append("  none")
    rate = status["throughput_1h"]
    lines.append(f"last hour: {rate['items_committed']} items, {human_bytes(rate['bytes_committed'])} committed "
                 f"({rate['items_per_min']}/min, {human_bytes(rate['bytes_per_s'])}/s)")
    lines.append("platforms:")
    for name, health in status["platforms"].items():
        detail = []
        if health["rate_limited"]:
            detail.append(f"rate limited since {health['rate_limited_since'] or '?'}"
                          + (f", slowed until {health['slowed_until']}" if health["slowed_until"] else ""))
        if health["auth_failures_1h"]:
            detail.append(f"{health['auth_failures_1h']} auth failure(s) since {health['auth_failed_since']}")
        lines.append(f"  {name:<9} {health['status']:<13} {'; '.join(detail)}".rstrip())
    uncertain = status["uncertain"]
    lines.append(f"uncertain (lease expired, worker silent): {uncertain['count']}"
                 + (f", oldest expired {uncertain['oldest_expired_at']}, owners {uncertain['by_owner']}"
                    if uncertain["count"] else ""))
    if status["feed_errors_unresolved"]:
        lines.append(f"feed pages failing: {status['feed_errors_unresolved']}")
    lines.append(f"stage delays (last {status['stage_delay_window_s'] / 3600:.0f} h):")
    for name, delay in status["stage_delays_s"].items():
        if delay["count"]:
            lines.append(f"  {name:<10} p50 {_seconds(delay['p50'])}  p95 {_seconds(delay['p95'])}  "
                         f"max {_seconds(delay['max'])}  ({delay['count']} items)")
        else:
            lines.append(f"  {name:<10} no items")
    disk = status["disk"]
    lines.append(f"disk: {human_bytes(disk['free_bytes'])} free of {human_bytes(disk['total_bytes'])} at {disk['path']}"
                 + ("  BELOW min_free_bytes" if disk["below_minimum"] else ""))
    return "\n".join(lines) + "\n"


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.1f} s"

"""`media-crawler failures [--since 1h] [--platform P] [--json] [--limit N] [--config sources.yaml]`.

Failures grouped by platform, stage and error class, each with its count,
first and last time, a few canonical URLs and the run ids; items waiting for a
retry are listed apart from items that gave up. Then each platform's incidents
(auth failure, rate limit, outage; the latest of each kind): since when, and
until when once a success ended it (store/reports/platform_incidents.py). Each section lists its most
recent groups, DEFAULT_LIMIT of them unless --limit says otherwise (0: all), and
says how many it left out; its total counts them all. Exit status 0 either way: this
command reports, it does not judge (`health --ready` does).
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from media_crawler.platforms.registry import names as platform_names

# The console script ends the process after the report without the interpreter's
# teardown (cli.end_without_teardown: the ledger's connections are closed first):
# freeing every object the imports and the report left takes time and writes nothing.
EXIT_WITHOUT_TEARDOWN = True

# Groups per section by default: a page for the person on call (the totals still count them all).
DEFAULT_LIMIT = 25
# Characters of a group's sample reason: cut in the middle, so its cause (at the end) survives.
WHY_WIDTH = 160


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from media_crawler.observe.target import add_config_argument

    add_config_argument(parser)
    parser.add_argument("--since", help="only failures newer than this: 1h, 30m, 7d or an ISO date (default: all)")
    parser.add_argument("--platform", choices=platform_names())
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT,
                        help=f"at most this many groups per section, the most recent (default {DEFAULT_LIMIT}; "
                             "0: all); the totals count every group, and the report says how many it left out")


def run(args: argparse.Namespace) -> int:
    from media_crawler.commands.durations import since_to_epoch
    from media_crawler.store.reports.failures import failure_report
    from media_crawler.observe.target import observed_config
    from media_crawler.store.ledger import Ledger

    now = time.time()
    try:
        since = since_to_epoch(args.since, now)
    except ValueError as exc:
        print(f"media-crawler failures: {exc}", file=sys.stderr)
        return 2
    if args.limit < 0:
        print("media-crawler failures: --limit must be 0 (all) or more", file=sys.stderr)
        return 2
    config = observed_config(args.config)
    from media_crawler.observe.read_from import read_from, read_from_line

    print(read_from_line(read_from(config)), file=sys.stderr)
    engine = Ledger(config.ledger_url).engine
    report = failure_report(engine, now=now, since=since, platform=args.platform, limit=args.limit or None)
    data = {**report.as_json(), "platform_incidents": _incidents(engine, now, args.platform, since)}
    if args.json:
        json.dump(data, sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(data))
    return 0


def _incidents(engine, now: float, platform: str | None, since: float | None) -> list[dict]:
    """Each platform's latest incident of each kind (auth, rate limit, outage): ongoing, or
    ended after `since`."""
    from media_crawler.store.reports import platform_signals

    health = platform_signals.platform_health(engine, now, (platform,) if platform else platform_names())
    return [shown for name, entry in sorted(health.items()) if platform in (None, name)
            for incident, shown in zip(entry["incidents"], platform_signals.health_json(entry)["incidents"])
            if since is None or incident["until"] is None or incident["until"] >= since]


def render_text(data: dict) -> str:
    """The report for a terminal: one line per group, its URLs and runs indented below."""
    from media_crawler.shown import clipped

    scope = f"since {data['since']}" if data["since"] else "all time"
    lines = [f"failures ({scope}, {data['platform'] or 'all platforms'}) at {data['generated_at']}"]
    for title, key in (("GAVE UP (failed, gone, failed feed pages)", "gave_up"),
                       ("RETRYING (retry_wait: another attempt is scheduled)", "retrying")):
        groups = data[key]
        lines.append("")
        lines.append(f"{title}: {data['totals'][key]}")
        if not groups:
            lines.append("  none")
        for group in groups:
            states = ",".join(f"{state}={count}" for state, count in sorted(group["states"].items()))
            when = f"first {group['first_seen']}  last {group['last_seen']}"
            if group.get("next_retry_at"):
                when += f"  next retry {group['next_retry_at']}"
            lines.append(f"  {group['platform']:<9} {group['stage']:<8} {group['error_class']:<16} "
                         f"{group['count']:>6}  {states}  {when}")
            if group["sample_message"]:
                lines.append(f"      why: {clipped(group['sample_message'], WHY_WIDTH)}")
            for url in group["canonical_urls"]:
                lines.append(f"      {url}")
            if group["run_ids"]:
                lines.append(f"      runs: {' '.join(run_id[:8] for run_id in group['run_ids'])}")
        omitted = (data.get("omitted_groups") or {}).get(key, 0)
        if omitted:
            lines.append(f"  ... and {omitted} more group{'s' if omitted > 1 else ''} (older; --limit 0 lists all)")
    if "platform_incidents" in data:
        from media_crawler.observe.incident_text import incident_lines

        incidents = data["platform_incidents"]
        lines += ["", f"PLATFORM INCIDENTS (the latest of each kind; a success ends one): {len(incidents)}"]
        lines += incident_lines(incidents) if incidents else ["  none"]
    return "\n".join(lines) + "\n"

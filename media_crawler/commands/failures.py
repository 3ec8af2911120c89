"""`media-crawler failures [--since 1h] [--platform P] [--json] [--config sources.yaml]`.

Failures grouped by platform, stage and error class, each with its count,
first and last time, a few canonical URLs and the run ids; items waiting for a
retry are listed apart from items that gave up. Exit status 0 either way: this
command reports, it does not judge (`health --ready` does).
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from media_crawler.models import PLATFORMS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from media_crawler.observe.target import add_config_argument

    add_config_argument(parser)
    parser.add_argument("--since", help="only failures newer than this: 1h, 30m, 7d or an ISO date (default: all)")
    parser.add_argument("--platform", choices=PLATFORMS)
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")


def run(args: argparse.Namespace) -> int:
    from media_crawler.commands.durations import since_to_epoch
    from media_crawler.observe.failures import failure_report
    from media_crawler.observe.target import observed_config
    from media_crawler.store.ledger import Ledger

    now = time.time()
    try:
        since = since_to_epoch(args.since, now)
    except ValueError as exc:
        print(f"media-crawler failures: {exc}", file=sys.stderr)
        return 2
    config = observed_config(args.config)
    report = failure_report(Ledger(config.ledger_url).engine, now=now, since=since, platform=args.platform)
    if args.json:
        json.dump(report.as_json(), sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(report.as_json()))
    return 0


def render_text(data: dict) -> str:
    """The report for a terminal: one line per group, its URLs and runs indented below."""
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
                lines.append(f"      why: {group['sample_message'][:160]}")
            for url in group["canonical_urls"]:
                lines.append(f"      {url}")
            if group["run_ids"]:
                lines.append(f"      runs: {' '.join(run_id[:8] for run_id in group['run_ids'])}")
    return "\n".join(lines) + "\n"

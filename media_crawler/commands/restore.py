"""`media-crawler restore --from DIR --home NEWHOME`: restore a backup, dispatch paused.

Restores into a fresh location, stops every sensor and schedule there,
cancels queued runs, fails runs that were in flight at backup time, and
reconciles the leases the backup recorded as held. Nothing starts by itself.
Check, re-run what is unfinished, then resume:

    export MEDIA_CRAWLER_HOME=NEWHOME DAGSTER_HOME=NEWHOME/dagster_home
    media-crawler reconcile --config NEWHOME/sources.yaml
    media-crawler rerun-failed --config NEWHOME/sources.yaml
    media-crawler restore --resume --home NEWHOME      # sensors and schedules as before the backup
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--from", dest="source", type=Path, help="the backup folder")
    parser.add_argument("--home", required=True, type=Path, help="the new location (must be empty)")
    parser.add_argument("--ledger-url", help="PostgreSQL backups: the empty database to restore the ledger into")
    parser.add_argument("--dagster-pg-url", help="PostgreSQL backups with Dagster's storage apart from the ledger")
    parser.add_argument("--resume", action="store_true",
                        help="after a restore: start the sensors and schedules that ran before the backup")


def run(args: argparse.Namespace) -> int:
    from media_crawler.recovery.restore import restore, resume

    if args.resume:
        started = resume(args.home, dagster_pg_url=args.dagster_pg_url)
        print(f"resumed: {', '.join(started) or 'nothing was running before the backup'}", file=sys.stderr)
        return 0
    if args.source is None:
        print("media-crawler restore: --from DIR is required (or --resume)", file=sys.stderr)
        return 2
    summary = restore(args.source, args.home, ledger_url=args.ledger_url, dagster_pg_url=args.dagster_pg_url)
    pause = summary.pause
    print(f"restored into {summary.home} in {summary.restore_s:.1f} s ({summary.blobs} blobs); reconciled in "
          f"{summary.reconcile_s:.1f} s: {summary.reconcile or 'nothing to repair'}", file=sys.stderr)
    print(f"dispatch paused: stopped {len(pause['sensors'])} sensor(s), {len(pause['schedules'])} schedule(s); "
          f"canceled {len(pause['runs_canceled'])} queued run(s); failed {len(pause['runs_failed'])} run(s) "
          "that were in flight at backup time", file=sys.stderr)
    print(f"next: export MEDIA_CRAWLER_HOME={summary.home} DAGSTER_HOME={summary.dagster_home}; "
          f"media-crawler rerun-failed --config {summary.config_path or 'sources.yaml'}; "
          f"media-crawler restore --resume --home {summary.home}", file=sys.stderr)
    return 0

"""`media-crawler restore --from DIR|s3://BUCKET/PREFIX --home NEWHOME`: restore a backup, dispatch paused.

Refuses a backup newer than this code (manifest format, ledger schema,
media-crawler or Dagster version), saying which version it needs. Restores
into a fresh location, stops every sensor and schedule there, cancels queued
runs, fails runs that were in flight at backup time, and reconciles the leases
the backup recorded as held. Reports the credential variables the restored
crawl reads that are not set here, and the recovery times. Nothing starts by
itself. Check, re-run what is unfinished, then resume:

    export MEDIA_CRAWLER_HOME=NEWHOME DAGSTER_HOME=NEWHOME/dagster_home
    media-crawler reconcile --config NEWHOME/sources.yaml
    media-crawler rerun-failed --config NEWHOME/sources.yaml
    media-crawler restore --resume --home NEWHOME      # sensors and schedules as before the backup
    media-crawler restore --times --home NEWHOME       # the recovery times, for the restore record

`--resume` refuses (exit 2, dispatch stays paused) while a credential variable
the crawl reads is unset; it then records the time to the first successful
partition in NEWHOME/restore.json.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from media_crawler.commands.backup import backup_location


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--from", dest="source", type=backup_location, metavar="DIR|s3://BUCKET/PREFIX",
                        help="the backup folder, or the bucket prefix a backup was written to")
    parser.add_argument("--home", required=True, type=Path, help="the new location (must be empty)")
    parser.add_argument("--ledger-url", help="PostgreSQL backups: the empty database to restore the ledger into")
    parser.add_argument("--dagster-pg-url", help="PostgreSQL backups with Dagster's storage apart from the ledger")
    parser.add_argument("--store", default=None, metavar="s3://BUCKET/PREFIX",
                        help="restore the blobs into this bucket prefix (empty; keys from the AWS environment) "
                             "instead of HOME/store; the restored sources.yaml names it")
    parser.add_argument("--resume", action="store_true",
                        help="after a restore: start the sensors and schedules that ran before the backup "
                             "(refused while a credential variable the crawl reads is unset)")
    parser.add_argument("--allow-missing", action="append", default=[], metavar="NAME",
                        help="with --resume: resume although this credential variable is unset (repeatable)")
    parser.add_argument("--times", action="store_true",
                        help="after a restore: print the recovery times (copy, reconcile, first successful partition)")


def run(args: argparse.Namespace) -> int:
    from media_crawler.config import ConfigError
    from media_crawler.recovery.restore import read_summary, recovery_times, restore, resume

    if args.allow_missing and not args.resume:
        raise ConfigError("--allow-missing goes with --resume")
    if args.resume:
        started = resume(args.home, dagster_pg_url=args.dagster_pg_url, allow_missing=tuple(args.allow_missing))
        print(f"resumed: {', '.join(started) or 'nothing was running before the backup'}", file=sys.stderr)
        summary = read_summary(args.home)  # resume measured the first successful partition into it
        if summary is not None:
            print_times(summary, sys.stderr)
        return 0
    if args.times:
        print_times(recovery_times(args.home, dagster_pg_url=args.dagster_pg_url), sys.stderr)
        return 0
    if args.source is None:
        raise ConfigError("restore: --from DIR or --from s3://BUCKET/PREFIX is required "
                          "(or --resume / --times with --home)")
    summary = restore(args.source, args.home, ledger_url=args.ledger_url, dagster_pg_url=args.dagster_pg_url,
                      store_uri=args.store)
    pause = summary.pause
    print(f"restored into {summary.home} in {summary.restore_s:.1f} s ({summary.blobs} blobs); reconciled in "
          f"{summary.reconcile_s:.1f} s: {summary.reconcile or 'nothing to repair'}", file=sys.stderr)
    print_versions(summary, sys.stderr)
    print(f"dispatch paused: stopped {len(pause['sensors'])} sensor(s), {len(pause['schedules'])} schedule(s); "
          f"canceled {len(pause['runs_canceled'])} queued run(s); failed {len(pause['runs_failed'])} run(s) "
          "that were in flight at backup time", file=sys.stderr)
    print_credentials(summary, sys.stderr)
    print_times(summary, sys.stderr)
    first = (f"set {', '.join(summary.credentials_missing)} (rerun-failed crawls with them too); "
             if summary.credentials_missing else "")
    print(f"next: {first}export MEDIA_CRAWLER_HOME={summary.home} DAGSTER_HOME={summary.dagster_home}; "
          f"media-crawler rerun-failed --config {summary.config_path or 'sources.yaml'}; "
          f"media-crawler restore --resume --home {summary.home}", file=sys.stderr)
    return 0


def print_versions(summary, out) -> None:
    backup, code = summary.versions.get("backup", {}), summary.versions.get("code", {})
    upgraded = " (upgraded to this code's on restore)" if summary.versions.get("ledger_upgraded") else ""
    print(f"backup written by media-crawler {backup.get('media_crawler') or '(not recorded)'}, dagster "
          f"{backup.get('dagster') or '(not recorded)'}, ledger schema version "
          f"{backup.get('ledger_schema') or '(not recorded)'}{upgraded}; restored with media-crawler "
          f"{code.get('media_crawler')}, dagster {code.get('dagster')}, schema version {code.get('ledger_schema')}",
          file=out)


def print_credentials(summary, out) -> None:
    required, missing = summary.credentials_required, summary.credentials_missing
    if not required:
        print("credentials: the backed-up crawl reads none (or its backup predates credential records)", file=out)
    elif missing:
        present = [name for name in required if name not in missing]
        print(f"credentials MISSING in this environment: {', '.join(missing)}"
              f"{'; present: ' + ', '.join(present) if present else ''}. Dispatch stays paused: "
              "`restore --resume` refuses until they are set", file=out)
    else:
        print(f"credentials: {', '.join(required)} set in this environment", file=out)


def print_times(summary, out) -> None:
    first = summary.first_successful_partition
    if first:
        partition = (f"{first['after_restore_began_s']:.1f} s after the restore began "
                     f"(run {first['run_id'][:8]}, partition {first.get('partition') or '-'})")
    else:
        partition = ("none yet (measured from the restored instance's runs: the end of the first successful run "
                     "started after the restore; `restore --resume` or `restore --times` records it)")
    print(f"recovery times: copy {summary.copy_s:.1f} s, dispatch pause {summary.pause_s:.1f} s, reconcile "
          f"{summary.reconcile_s:.1f} s; first successful partition: {partition}", file=out)

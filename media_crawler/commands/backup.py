"""`media-crawler backup --to DIR|s3://BUCKET/PREFIX`: back up Dagster's storage, the ledger and the store, live.

SQLite databases through the sqlite3 backup API, PostgreSQL through pg_dump,
blobs checked against their names while copied (recovery/backup.py explains
the order that makes a backup of a running crawl restorable, and the publish order
that keeps a killed backup restorable: blobs before the files, the manifest last,
a folder's files switched at once by the manifest's rename). A second backup
into the same folder copies only new blobs. A bucket prefix holds the same layout as
keys (recovery/bucket.py), for a crawl whose store is a folder or a bucket. The manifest records the ledger's
schema version, the media-crawler and Dagster versions, and the names of the
credential variables the crawl reads. docs/RECOVERY.md has the drill.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from media_crawler.config import load_config
from media_crawler.environment import config_path_default


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--to", required=True, type=backup_location, metavar="DIR|s3://BUCKET/PREFIX",
                        help="backup folder (created; refreshed if it exists), or a bucket prefix (keys from the "
                             "AWS environment; refreshed the same way)")
    parser.add_argument("--config", default=config_path_default(), help="sources.yaml path")
    parser.add_argument("--dagster-home", type=Path, default=None,
                        help="the Dagster instance to back up (default: the one `crawl` uses, $DAGSTER_HOME else "
                             "$MEDIA_CRAWLER_HOME/dagster_home; none there: ledger and store only)")


def backup_location(text: str) -> "Path | str":
    """A folder, or an s3://BUCKET/PREFIX kept as text (a Path would fold its '//')."""
    return text if text.startswith("s3://") else Path(text)


def run(args: argparse.Namespace) -> int:
    from media_crawler.recovery.backup import backup, required_credentials

    from media_crawler.dagster_home import dagster_home_origin, dagster_home_path

    config = load_config(args.config)
    dagster_home, origin = (Path(args.dagster_home), "--dagster-home") if args.dagster_home else \
        (dagster_home_path(), dagster_home_origin())
    if not dagster_home.is_dir():  # the run history is said to be left out, never silently
        print(f"no Dagster home at {dagster_home} ({origin}): the backup holds no run history", file=sys.stderr)
        dagster_home = None
    else:
        print(f"Dagster home {dagster_home} ({origin})", file=sys.stderr)
    manifest = backup(config, dagster_home, args.to)
    blobs = manifest.blobs
    print(f"backup in {args.to}: ledger ({manifest.ledger}), Dagster storage ({manifest.dagster}), "
          f"{blobs['copied']} new blobs ({blobs['bytes'] / 1e6:.1f} MB), {blobs['already_there']} already there, "
          f"{manifest.leases_held} lease(s) held at snapshot time; "
          f"{manifest.finished_at - manifest.started_at:.1f} s", file=sys.stderr)
    print(f"written by media-crawler {manifest.media_crawler_version or 'unknown'}, "
          f"dagster {manifest.dagster_version}; "
          f"ledger schema version {manifest.ledger_schema_version}; the restored crawl reads credentials from: "
          f"{', '.join(required_credentials(manifest.credentials)) or 'none'} (names only)", file=sys.stderr)
    if blobs["corrupt"]:
        print(f"{len(blobs['corrupt'])} blob(s) in the store do not match their names and were NOT backed up; "
              "run `media-crawler reconcile --verify-hashes --repair`", file=sys.stderr)
        return 1
    return 0

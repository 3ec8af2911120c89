"""`media-crawler export [--since 7d] [--platform P]`: the manifest of committed media.

One JSON object per line with the blob's path and sha256 and the metadata a
yt-dlp info JSON or gallery-dl metadata user expects (title, author, post,
published time, dimensions, duration, quality).
"""
from __future__ import annotations

import argparse
import json
import sys

from media_crawler.environment import config_path_default
from media_crawler.platforms.registry import names as platform_names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=config_path_default())
    parser.add_argument("--since", help="committed within this long (1h, 7d) or since an ISO date")
    parser.add_argument("--platform", choices=platform_names())
    parser.add_argument("--out", help="write to this file instead of stdout")


def manifest_rows(ledger, store, since: float | None = None, platform: str | None = None):
    from media_crawler.store.reports.reads import committed_rows

    for row in committed_rows(ledger, since=since, platform=platform):
        yield {
            "platform": row.platform, "item_id": row.item_id, "variant": row.variant, "kind": row.kind,
            "canonical_url": row.canonical_url, "sha256": row.sha256, "size": row.size,
            "path": store.location(row.sha256), "group": row.group_key, "source": row.source_key,
            "day": row.day, "published_at": row.published_at, "committed_at": row.committed_at,
            "meta": row.meta,
        }


def run(args: argparse.Namespace) -> int:
    from media_crawler.commands.durations import since_to_epoch
    from media_crawler.config import load_config
    from media_crawler.store.open_store import open_blob_store
    from media_crawler.store.ledger import Ledger

    config = load_config(args.config)
    ledger, store = Ledger(config.ledger_url), open_blob_store(config.store_location, local_root=config.store_root)
    out = open(args.out, "w") if args.out else sys.stdout
    try:
        count = 0
        for row in manifest_rows(ledger, store, since_to_epoch(args.since), args.platform):
            out.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
            count += 1
    finally:
        if args.out:
            out.close()
    print(f"exported {count} records", file=sys.stderr)
    return 0

"""`media-crawler fetch-urls --feed URL --store DIR [--workers N]`.

The same engine, ledger and store as the Dagster pipeline, without Dagster's
orchestration: for users with a list of URLs in hand (and for the benchmark).
The ledger lives in the store folder unless --ledger says otherwise, so a
second run over the same list resumes and downloads nothing twice.
"""
from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path

from media_crawler.config import config_from_dict


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--feed", required=True, help='URL of a JSON list {"items":[{"url","sha256","size"}]}')
    parser.add_argument("--store", required=True, help="store folder (blobs under sha256/)")
    parser.add_argument("--workers", type=int, default=8, help="download threads (default 8)")
    parser.add_argument("--ledger", help="ledger database URL (default: sqlite in the store folder)")
    parser.add_argument("--allow-host", action="append", default=[],
                        help="also allow this internal host (e.g. 127.0.0.1 for a local server)")
    parser.add_argument("--max-item-bytes", type=int, default=4 * 1024**3)


def run(args: argparse.Namespace) -> int:
    from media_crawler.models import DayWindow, Source
    from media_crawler.observe.logging import configure
    from media_crawler.pipeline.fetch_list import fetch_list

    configure()
    store = Path(args.store).resolve()
    config = config_from_dict({
        "store": str(store),
        "ledger_url": args.ledger or f"sqlite:///{store / 'ledger.db'}",
        "allow_hosts": args.allow_host,
        "max_item_bytes": args.max_item_bytes,
        "min_free_bytes": 64 * 1024**2,
        "sources": [{"urls": args.feed}],
    })
    source = Source.parse("urls", args.feed)
    window = DayWindow(datetime.now(timezone.utc).date())
    summary = fetch_list(config, source, window, workers=args.workers)
    print(summary.line(), file=sys.stderr)
    return 0 if summary.complete else 1

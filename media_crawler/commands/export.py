"""`media-crawler export [--format jsonl|wacz] [--since 7d | --day D] [--platform P] [--out FILE]`.

jsonl (the default): the manifest of committed media, one JSON object per line with the
blob's path and sha256 and the metadata a yt-dlp info JSON or gallery-dl metadata user
expects (title, author, post, published time, dimensions, duration, quality), what
the media response that completed the item said, and the sha256 of the kept API answer
it was read from (`api_answer_sha256`: the answer store's blob, the WARC's payload digest).

wacz: the archive an archivist opens (export/wacz.py): the kept API answers as
request/response pairs and each committed item as a WARC record, with its CDXJ index,
pages and datapackage. `--out` is required. `--day D` cuts by capture day (UTC): an
answer fetched, an item committed that day, so a large archive is one file a day.
"""
from __future__ import annotations

import argparse
import json
import sys
from datetime import date, datetime, timezone

from media_crawler.environment import config_path_default
from media_crawler.platforms.registry import names as platform_names

DAY_S = 86400


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=config_path_default())
    parser.add_argument("--format", choices=("jsonl", "wacz"), default="jsonl")
    when = parser.add_mutually_exclusive_group()
    when.add_argument("--since", help="committed (fetched) within this long (1h, 7d) or since an ISO date")
    when.add_argument("--day", help="committed (fetched) on this UTC day, YYYY-MM-DD")
    parser.add_argument("--platform", choices=platform_names())
    parser.add_argument("--out", help="write to this file instead of stdout (required for wacz)")


def manifest_rows(ledger, store, since: float | None = None, platform: str | None = None, until: float | None = None):
    from media_crawler.store.reports.reads import committed_rows

    for row in committed_rows(ledger, since=since, until=until, platform=platform):
        yield {
            "platform": row.platform, "item_id": row.item_id, "variant": row.variant, "kind": row.kind,
            "canonical_url": row.canonical_url, "sha256": row.sha256, "size": row.size,
            "path": store.location(row.sha256), "group": row.group_key, "source": row.source_key,
            "day": row.day, "published_at": row.published_at, "committed_at": row.committed_at,
            "meta": row.meta, "media_response": row.media_response,
            # The kept API answer the item was read from (pipeline/discover.py), when answers are kept.
            "api_answer_sha256": row.meta.get("api_answer_sha256") if isinstance(row.meta, dict) else None,
        }


def window(args: argparse.Namespace) -> tuple[float | None, float | None]:
    """(since, until) in unix seconds from --since or --day."""
    from media_crawler.commands.durations import since_to_epoch
    from media_crawler.commands.selection import UsageError

    if args.day:
        try:
            start = datetime.combine(date.fromisoformat(args.day), datetime.min.time(), tzinfo=timezone.utc)
        except ValueError:
            raise UsageError(f"--day takes a date like 2024-05-01, not {args.day!r}") from None
        return start.timestamp(), start.timestamp() + DAY_S
    try:
        return since_to_epoch(args.since), None
    except ValueError as error:
        raise UsageError(str(error)) from None


def run(args: argparse.Namespace) -> int:
    from media_crawler.config import load_config
    from media_crawler.store.ledger import Ledger
    from media_crawler.store.open_store import open_blob_store

    from media_crawler.commands.selection import UsageError

    if args.format == "wacz" and not args.out:
        raise UsageError("--format wacz needs --out FILE (a ZIP is not written to a terminal)")
    since, until = window(args)
    config = load_config(args.config)
    ledger, store = Ledger(config.ledger_url), open_blob_store(config.store_location, local_root=config.store_root)
    if args.format == "wacz":
        return _wacz(args, config, ledger, store, since, until)
    out = open(args.out, "w") if args.out else sys.stdout
    try:
        count = 0
        for row in manifest_rows(ledger, store, since, args.platform, until):
            out.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
            count += 1
    finally:
        if args.out:
            out.close()
    print(f"exported {count} records", file=sys.stderr)
    return 0


def _wacz(args, config, ledger, store, since, until) -> int:
    from media_crawler.export.wacz import ExportScope, export_wacz
    from media_crawler.scrub import register_environment_secrets
    from media_crawler.store.open_store import open_answer_store

    # The URLs the archive names are scrubbed again on the way out, of the configured
    # credentials too (as a crawl registers them: pipeline/runtime.py).
    register_environment_secrets(
        env_name for settings in config.platforms.values() for env_name in settings.credential_env.values())
    answers = open_answer_store(config.store_location, local_root=config.store_root)
    counts = export_wacz(args.out, ledger, store, answers,
                         ExportScope(since=since, until=until, platform=args.platform))
    print(f"exported {counts.responses} items, {counts.revisits} revisits and {counts.answers} API answers "
          f"({counts.answer_revisits} of them revisits) to {args.out} ({counts.bytes} bytes)", file=sys.stderr)
    return 0

"""`media-crawler compact --older-than 30d [--answers-older-than 90d] [--dry-run] [--vacuum]`: shrink the ledger.

At 10^6 items a day the ledger grows by about a gigabyte a day, most of it
columns only unfinished items need (signed media URLs above all). This keeps
the seen-set and the manifest forever and releases the rest for items finished
before the cut-off (store/compaction.py lists both). It runs beside crawls: it
touches only finished rows, in batches. `--vacuum` gives the space back
(SQLite VACUUM takes the database for a while; PostgreSQL's plain VACUUM does not).

`--answers-older-than` also releases the API answers kept for the archive
(pipeline/answers.py) fetched before its cut-off: their rows, then every answer blob no
row names (store/answer_release.py). Without it answers are kept for good. What each
item's media response said (`mc_tasks.media_response`) is kept either way.
"""
from __future__ import annotations

import argparse
import sys
import time

from media_crawler.config import ConfigError, load_config
from media_crawler.environment import config_path_default


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=config_path_default(), help="sources.yaml path")
    parser.add_argument("--older-than", default="30d", help="finished at least this long ago: 12h, 30d (default 30d)")
    parser.add_argument("--answers-older-than", default=None,
                        help="also release the API answers kept for the archive fetched at least this long ago "
                             "(90d; default: keep them)")
    parser.add_argument("--dry-run", action="store_true", help="count what would be released, change nothing")
    parser.add_argument("--vacuum", action="store_true", help="then return the space (VACUUM)")


def run(args: argparse.Namespace, out=None) -> int:
    from media_crawler.store.compaction import compact, ledger_bytes, reclaim_space
    from media_crawler.store.ledger import Ledger

    out = out or sys.stdout
    span = _span(args.older_than)
    answers_span = _span(args.answers_older_than) if args.answers_older_than is not None else None
    config = load_config(args.config)
    ledger = Ledger(config.ledger_url)
    before_bytes = ledger_bytes(ledger)
    done = compact(ledger, before=time.time() - span.total_seconds(), dry_run=args.dry_run)
    verb = "would release" if args.dry_run else "released"
    print(f"{verb} the unfinished-only columns of {done.rows} finished row(s), {done.feed_error_bodies} old feed "
          f"error body(ies) and {done.feed_walk_markers} feed-walk marker(s)", file=out)
    if answers_span is not None:
        from media_crawler.store.answer_release import release_answers
        from media_crawler.store.open_store import open_answer_store

        store = open_answer_store(config.store_location, local_root=config.store_root)
        answers = release_answers(ledger, store, before=time.time() - answers_span.total_seconds(),
                                  dry_run=args.dry_run)
        print(f"{verb} {answers.rows} kept API answer(s) ({answers.row_bytes} bytes) and {answers.blobs} "
              "answer blob(s) no remaining answer names", file=out)
    if args.vacuum and not args.dry_run:
        reclaim_space(ledger)
        print(f"ledger: {before_bytes} -> {ledger_bytes(ledger)} bytes", file=out)
    return 0


def _span(text: str):
    from media_crawler.commands.rerun_failed import parse_span

    try:
        return parse_span(text)
    except argparse.ArgumentTypeError as error:
        raise ConfigError(str(error)) from None

"""`media-crawler fetch-urls --feed URL --store DIR [--workers N]`.

The same engine, ledger and store as the Dagster pipeline, without Dagster's
orchestration: for users with a list of URLs in hand (and for the benchmark).
The ledger lives in the store folder unless --ledger says otherwise, so a
second run over the same list resumes and downloads nothing twice.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import gc
import logging
import sys
from datetime import datetime, timezone
from pathlib import Path

from media_crawler.config import config_from_dict
from media_crawler.observe.batched_lines import BatchedLines, ProcessWriteLock


# run() leaves nothing open behind it (threads and shard processes joined, log
# lines written), so the console script may skip the interpreter's teardown
# (cli.end_without_teardown).
EXIT_WITHOUT_TEARDOWN = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--feed", required=True, help='URL of a JSON list {"items":[{"url","sha256","size"}]}')
    parser.add_argument("--store", required=True,
                        help="store folder (blobs under sha256/), or s3://BUCKET/PREFIX (keys and endpoint from "
                             "the AWS environment; the ledger and staged files then live in "
                             "$MEDIA_CRAWLER_HOME/s3/BUCKET/PREFIX)")
    parser.add_argument("--workers", type=int, default=8, help="downloads in flight, in all processes (default 8)")
    parser.add_argument("--processes", type=int, default=None,
                        help="processes sharing the downloads (default: one per core, at most 4; 1 on non-Linux)")
    parser.add_argument("--ledger", help="ledger database URL (default: sqlite in the store folder)")
    parser.add_argument("--allow-host", action="append", default=[],
                        help="also allow this host: NAME or NAME:PORT, an origin URL (its host and port), or "
                             "NAME:* for every port; an internal one (127.0.0.1, a NAS) only on the port listed")
    parser.add_argument("--max-item-bytes", type=int, default=4 * 1024**3)


def store_places(store: str) -> tuple[str, Path]:
    """(what the store is, the local folder of its ledger and staged files) for --store:
    a folder is both; a bucket's local folder is under the crawl home, one per bucket URI."""
    from media_crawler.environment import home_default
    from media_crawler.store.open_store import is_object_store

    if is_object_store(store):
        from media_crawler.store.s3.settings import parse_uri

        try:
            uri = parse_uri(store)
        except ValueError as exc:
            from media_crawler.config import ConfigError

            raise ConfigError(f"--store: {exc}") from None
        return str(uri), Path(home_default()).resolve() / "s3" / uri.bucket / uri.prefix
    folder = Path(store).expanduser().resolve()
    return str(folder), folder


@contextlib.contextmanager
def _own_log_stream(process_lock: ProcessWriteLock | None):
    """A forked shard process's log stream: its parent's flusher thread did not
    come along, so it starts its own, writing under the lock it shares with
    the parent, and flushes it before exiting."""
    from media_crawler.observe.logging import configure

    batched = None if sys.stdout.isatty() else BatchedLines(sys.stdout, process_lock=process_lock).start()
    configure(stream=batched)
    try:
        yield
    finally:
        if batched is not None:
            with contextlib.suppress(BrokenPipeError):  # the reader left: the parent says so
                batched.close()


def run(args: argparse.Namespace) -> int:
    from media_crawler.observe.logging import configure

    # Thousands of items make millions of short-lived objects and almost no
    # reference cycles: collect the young generation less often.
    thresholds = gc.get_threshold()
    gc.set_threshold(50_000, 20, 100)
    # The JSON lines name no thread or process (`worker` is fixed per process):
    # spare every log record the lookups.
    record_flags = logging.logThreads, logging.logProcesses, logging.logMultiprocessing
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    batched = None if sys.stdout.isatty() else BatchedLines(sys.stdout).start()
    configure(stream=batched)
    try:
        return _fetch(args, batched)
    finally:
        if batched is not None:
            try:
                batched.close()
            except BrokenPipeError:
                # `fetch-urls | head`: the log's reader left. Not an error, and caught
                # here so the exit code still says whether the list is complete.
                from media_crawler.cli import stdout_to_devnull

                stdout_to_devnull()
            configure()  # back to the plain stdout handler for whatever runs next in this process
        if not getattr(args, "process_ends", False):
            # An in-process caller (a test) gets the collector back as it was. Not
            # on the way out of the process: unfreezing makes the next collection a
            # full one, over every object of the imports (~0.3 s here).
            gc.unfreeze()
            gc.set_threshold(*thresholds)
        logging.logThreads, logging.logProcesses, logging.logMultiprocessing = record_flags


def _fetch(args: argparse.Namespace, batched: BatchedLines | None) -> int:
    from media_crawler.models import DayWindow
    from media_crawler.platforms.registry import parse_source
    from media_crawler.pipeline.fetch_list import fetch_list
    from media_crawler.pipeline.shard_processes import FORK_AVAILABLE, default_process_count

    gc.freeze()  # the modules just imported: long-lived, never worth another look
    store, local = store_places(args.store)
    if store != str(local):
        local.mkdir(parents=True, exist_ok=True)
    config = config_from_dict({
        "store": store,
        "ledger_url": args.ledger or f"sqlite:///{local / 'ledger.db'}",
        "allow_hosts": args.allow_host,
        "max_item_bytes": args.max_item_bytes,
        "min_free_bytes": 64 * 1024**2,
        "sources": [{"urls": args.feed}],
    })
    if config.store_url:  # staged files next to the ledger, in the bucket's local folder
        config = dataclasses.replace(config, store_root=local)
    source = parse_source("urls", args.feed)
    window = DayWindow(datetime.now(timezone.utc).date())
    processes = args.processes if args.processes is not None else default_process_count(args.workers)
    if processes > 1 and not FORK_AVAILABLE:
        print("fetch-urls: --processes needs fork (Linux); using one process", file=sys.stderr)
        processes = 1
    process_lock = batched.share_across_processes() if batched is not None and processes > 1 else None
    summary = fetch_list(config, source, window, workers=args.workers, processes=max(1, processes),
                         child_logging=functools.partial(_own_log_stream, process_lock))
    print(summary.line(), file=sys.stderr)
    return 0 if summary.complete else 1

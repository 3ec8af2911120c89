"""`media-crawler fetch-urls --feed URL --store DIR [--workers N]`.

The same engine, ledger and store as the Dagster pipeline, without Dagster's
orchestration: for users with a list of URLs in hand (and for the benchmark).
The ledger lives in the store folder unless --ledger says otherwise, so a
second run over the same list resumes and downloads nothing twice.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import select
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path

from media_crawler.config import config_from_dict


# Writes up to this size reach a pipe whole, never mixed with another process's.
PIPE_BUF = getattr(select, "PIPE_BUF", 4096)

# run() leaves nothing open behind it (threads and shard processes joined, log
# lines written), so the console script may skip the interpreter's teardown
# (cli.end_without_teardown).
EXIT_WITHOUT_TEARDOWN = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--feed", required=True, help='URL of a JSON list {"items":[{"url","sha256","size"}]}')
    parser.add_argument("--store", required=True, help="store folder (blobs under sha256/)")
    parser.add_argument("--workers", type=int, default=8, help="downloads in flight, in all processes (default 8)")
    parser.add_argument("--processes", type=int, default=None,
                        help="processes sharing the downloads (default: one per core, at most 4; 1 on non-Linux)")
    parser.add_argument("--ledger", help="ledger database URL (default: sqlite in the store folder)")
    parser.add_argument("--allow-host", action="append", default=[],
                        help="also allow this internal host (e.g. 127.0.0.1 for a local server)")
    parser.add_argument("--max-item-bytes", type=int, default=4 * 1024**3)


class BatchedLines:
    """The item log's stream when stdout is a file or a pipe: the lines arrive
    in batches, at most `interval` seconds late, one write() per batch rather
    than one per line. Every line is still written, whole and in order; a
    terminal keeps line-by-line output. (At 5,000 small files the four stage
    lines per item are 20,000 system calls, each handing the GIL to the
    download threads and waiting to get it back.) The batch is kept here, not
    left to stdout's buffer, which PYTHONUNBUFFERED=1 turns into a write per line.

    A batch goes out in writes of whole lines of at most PIPE_BUF bytes: when
    several processes share one pipe (--processes), the kernel keeps such a
    write in one piece, so their lines interleave but never mix.
    """

    def __init__(self, stream, interval: float = 0.2) -> None:
        self._stream, self._interval = stream, interval
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reader_left = False
        self._thread = threading.Thread(target=self._flush_periodically, name="mc-log-flush", daemon=True)

    def start(self) -> "BatchedLines":
        self._thread.start()
        return self

    def write(self, text: str) -> int:
        if self._reader_left:  # nobody reads them any more: do not pile them up for the rest of the run
            return len(text)
        with self._lock:
            self._lines.append(text)
        return len(text)

    def flush(self) -> None:
        """Called by the logging handler after each line: the flusher thread does it."""

    def close(self) -> None:
        """Write what is left; BrokenPipeError if the reader left (`| head`), now or earlier."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if self._reader_left:
            raise BrokenPipeError("the log's reader left")
        self._write_batch()

    def _flush_periodically(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._write_batch()
            except (OSError, ValueError):  # the reader left (`| head`): close() reports it
                self._reader_left = True
                with self._lock:
                    self._lines.clear()
                return

    def _write_batch(self) -> None:
        with self._lock:
            lines, self._lines = self._lines, []
        chunk: list[str] = []
        size = 0
        for line in lines:
            length = len(line) if line.isascii() else len(line.encode("utf-8", "replace"))
            if chunk and size + length > PIPE_BUF:
                self._write_chunk(chunk)
                chunk, size = [], 0
            chunk.append(line)
            size += length
        if chunk:
            self._write_chunk(chunk)

    def _write_chunk(self, lines: list[str]) -> None:
        self._stream.write("".join(lines))
        self._stream.flush()


@contextlib.contextmanager
def _own_log_stream():
    """A forked shard process's log stream: its parent's flusher thread did not
    come along, so it starts its own, and flushes it before exiting."""
    from media_crawler.observe.logging import configure

    batched = None if sys.stdout.isatty() else BatchedLines(sys.stdout).start()
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
        return _fetch(args)
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


def _fetch(args: argparse.Namespace) -> int:
    from media_crawler.models import DayWindow, Source
    from media_crawler.pipeline.fetch_list import fetch_list
    from media_crawler.pipeline.shard_processes import FORK_AVAILABLE, default_process_count

    gc.freeze()  # the modules just imported: long-lived, never worth another look
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
    processes = args.processes if args.processes is not None else default_process_count(args.workers)
    if processes > 1 and not FORK_AVAILABLE:
        print("fetch-urls: --processes needs fork (Linux); using one process", file=sys.stderr)
        processes = 1
    summary = fetch_list(config, source, window, workers=args.workers, processes=max(1, processes),
                         child_logging=_own_log_stream)
    print(summary.line(), file=sys.stderr)
    return 0 if summary.complete else 1

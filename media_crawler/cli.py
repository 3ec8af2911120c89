"""The `media-crawler` command: one subcommand per module in commands/.

Each module exposes `add_arguments(parser)` and `run(args) -> int`; importing
them lazily keeps `media-crawler --help` fast (Dagster takes a second to import).
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import logging
import os
import sys
import warnings
from typing import NoReturn

COMMANDS = {
    "sim": ("media_crawler.commands.sim", "run the built-in platform simulator on 127.0.0.1"),
    "crawl": ("media_crawler.commands.crawl", "crawl sources for days through Dagster (one run per shard and day)"),
    "demo": ("media_crawler.commands.demo", "start the simulator and crawl it into ./var (make demo)"),
    "ui": ("media_crawler.commands.ui", "simulator + dagster-daemon + dagster-webserver on 127.0.0.1 (make ui)"),
    "normalize": ("media_crawler.commands.normalize", "print the records a saved API response yields"),
    "fetch-urls": ("media_crawler.commands.fetch_urls", "download a plain URL list without Dagster"),
    "export": ("media_crawler.commands.export",
               "write the manifest of committed media as JSON lines, or the archive as a WACZ (--format wacz)"),
    "sources": ("media_crawler.commands.sources", "list the configured sources: keys, shards, platforms"),
    # Observability (observe/): what is failing, where, since when.
    "failures": ("media_crawler.commands.failures", "failures grouped by platform, stage and error class"),
    "status": ("media_crawler.commands.status", "backlog, throughput, platform health, stage delays, disk"),
    "metrics": ("media_crawler.commands.metrics", "serve Prometheus metrics"),
    "health": ("media_crawler.commands.health", "liveness / readiness probe for orchestrators"),
    # Recovery.
    "reconcile": ("media_crawler.commands.reconcile", "check the store against the ledger (and --repair)"),
    "rerun-failed": ("media_crawler.commands.rerun_failed", "re-execute failed partitions"),
    "compact": ("media_crawler.commands.compact",
                "release what finished items no longer need from the ledger (keeps the seen-set and manifest)"),
    "reshard": ("media_crawler.commands.reshard", "apply a changed shard count of sources.yaml (downloads nothing)"),
    "upgrade-home": ("media_crawler.commands.upgrade_home",
                     "move a home made with per-source partitions to shard partitions (downloads nothing)"),
    "backup": ("media_crawler.commands.backup", "back up the ledger, Dagster storage and the store"),
    "restore": ("media_crawler.commands.restore", "restore a backup into a fresh location, dispatch paused"),
}


def main(argv: list[str] | None = None, *, process_ends: bool = False) -> int:
    """Run one subcommand. process_ends: nothing runs in this process after it
    (the console script), so a command that allows it (`EXIT_WITHOUT_TEARDOWN`)
    ends the process itself, see end_without_teardown."""
    # Dagster flags its yaml logging config (dagster.yaml python_logs) as beta on every run.
    warnings.filterwarnings("ignore", message=".*yaml-defined logging configuration.*")
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="media-crawler")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = argv[0] if argv and argv[0] in COMMANDS else None
    # A command named: its parser alone (the others' would only be built to be thrown
    # away, 19 parsers of every command's start-up); else all, for the listing and errors.
    for name, (module_name, help_text) in COMMANDS.items():
        if chosen is not None and name != chosen:
            continue
        command = sub.add_parser(name, help=help_text, description=help_text)
        command.set_defaults(_module=module_name)
        if name == chosen:
            with imports_uncollected():
                importlib.import_module(module_name).add_arguments(command)
    args = parser.parse_args(argv)
    args.process_ends = process_ends
    with imports_uncollected():
        module = importlib.import_module(args._module)
    try:
        code = int(module.run(args) or 0)
    except BrokenPipeError:
        # `media-crawler export | head`: the reader left; that is not an error.
        stdout_to_devnull()
        code = 0
    except Exception as exc:  # noqa: BLE001 - the one place a failure becomes a line, not a traceback
        code = report_failure(args.command, exc)
    if process_ends and getattr(module, "EXIT_WITHOUT_TEARDOWN", False):
        end_without_teardown(code)
    return code


@contextlib.contextmanager
def imports_uncollected():
    """No garbage collection while a command's modules are imported: the imports make
    tens of thousands of objects that live as long as the process and next to no
    cycles, and the collector would walk the young ones every 700 allocations."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


USAGE_EXIT, DATA_EXIT = 2, 1


def report_failure(command: str, exc: Exception) -> int:
    """One JSON line on stderr for a command that failed, never a traceback: exit 2 for
    bad usage or configuration, 1 for bad data or a failure on the way. The text is
    scrubbed; MEDIA_CRAWLER_DEBUG=1 adds the (scrubbed) traceback for a developer."""
    import json
    import traceback

    from media_crawler.commands.selection import UsageError
    from media_crawler.config import ConfigError
    from media_crawler.environment import debug_enabled
    from media_crawler.errors import CrawlError
    from media_crawler.scrub import excerpt, scrub_text

    if isinstance(exc, UsageError):
        error_class, message, code = exc.error_class, str(exc), USAGE_EXIT
    elif isinstance(exc, ConfigError):
        error_class, message, code = "config_error", str(exc), USAGE_EXIT
    elif isinstance(exc, CrawlError):
        error_class, message, code = exc.error_class.value, exc.message, DATA_EXIT
    else:
        error_class, message, code = "internal_error", f"{type(exc).__name__}: {exc}", DATA_EXIT
    line = {"event": "command_failed", "command": command, "error_class": error_class,
            "message": excerpt(message, 2000)}
    if debug_enabled():
        line["traceback"] = scrub_text("".join(traceback.format_exception(exc)))
    print(json.dumps(line, ensure_ascii=False), file=sys.stderr)
    return code


def stdout_to_devnull() -> None:
    """Stdout's reader left (`| head`): what is still written goes nowhere, without EPIPE."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def console_main() -> NoReturn:
    """The `media-crawler` console script."""
    sys.exit(main(process_ends=True))


def end_without_teardown(code: int) -> NoReturn:
    """End the process now, skipping the interpreter's teardown.

    After a fetch-urls run, teardown is a full garbage collection and then
    freeing, one at a time, every object the imports (SQLAlchemy, requests,
    Pillow) and the run left: 0.3-0.7 s of one core on 2 cores, measured, and
    nothing of it reaches the disk. What teardown does that matters is done here
    first: the ledger's connections close (SQLite checkpoints its WAL into the
    database), logging's handlers flush and close, and so do the standard
    streams. The command has joined its threads and processes before returning.
    """
    from media_crawler.store.database import dispose_engines

    dispose_engines()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # the reader left, or the stream is closed: nothing more to say
            pass
    os._exit(code)


if __name__ == "__main__":
    console_main()

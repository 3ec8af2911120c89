"""CPU by concern of one `fetch-urls` run: where a run's CPU goes, as issue 31's table has it.

    python -m bench profile --feed URL [--store DIR] [--workers 8] [--allow-host URL]

Runs fetch-urls in this process (one process: a forked shard would not be profiled)
with cProfile in every thread, timed by each thread's own CPU clock
(`time.thread_time`), and sums every function's own time into concerns by where
its code lives (Pillow: decode; hashlib: sha256; fsync, link, mkdir, open: file
system; urllib3, http.client, sockets: HTTP; SQLAlchemy, sqlite3, store/: ledger;
logging and observe/: logging; ...). Imports before the run are timed apart, by the
process's CPU clock. The profiler's own cost inflates the Python-heavy concerns, so
read the shares against each other and before/after, not as seconds of a plain run.
The process's total CPU (os.times) is printed beside them.
"""
from __future__ import annotations

import argparse
import cProfile
import os
import sys
import tempfile
import threading
import time
from collections import defaultdict

# (concern, substrings of a function's file name or of a built-in's name), first match wins.
CONCERNS = (
    ("import and start-up", ("<frozen importlib", "<module>", "'exec' of", "marshal", "site-packages/_distutils")),
    ("decode (Pillow)", ("/PIL/", "ImagingDecoder", "'decode' of 'ImagingDecoder'")),
    ("sha256", ("_hashlib", "hashlib")),
    ("file system (fsync, create, link, mkdir, .part writes)",
     ("posix.fsync", "posix.link", "posix.mkdir", "posix.open", "posix.unlink", "posix.stat", "posix.lstat",
      "posix.fstat", "posix.rename", "posix.close", "sync_file_range", "posix.posix_fadvise", "_ctypes",
      "'write' of '_io", "'read' of '_io", "'readinto' of '_io", "io.open", "pathlib.py", "/media_crawler/store/cas",
      "/media_crawler/store/staging")),
    ("ledger (SQLAlchemy + sqlite3)", ("sqlalchemy", "sqlite3", "/media_crawler/store/")),
    ("HTTP (urllib3, http.client, sockets)",
     ("urllib3", "http/client", "socket", "_ssl", "requests/", "email/", "/media_crawler/download/")),
    ("JSON logging", ("logging/", "/media_crawler/observe/", "json/", "_json", "/media_crawler/scrub")),
    ("URL policy and pinning", ("/media_crawler/net/", "urllib/parse", "ipaddress")),
    ("verification (Python side)", ("/media_crawler/verify/",)),
    ("threads and hand-offs", ("threading.py", "queue", "concurrent/futures", "_thread", "'acquire' of", "'release' of")),
)
OTHER = "other (glue, GC, pipeline)"


def concern_of(code) -> str:
    where = code if isinstance(code, str) else f"{code.co_filename}:{code.co_name}"
    for concern, needles in CONCERNS:
        if any(needle in where for needle in needles):
            return concern
    return OTHER


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--feed", required=True)
    parser.add_argument("--store", help="store folder (default: a fresh temporary one, removed after)")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--allow-host", action="append", default=None,
                        help="as fetch-urls' (default: the feed's origin)")
    parser.add_argument("--detail", type=int, default=0, help="also list the N costliest functions of `other`")
    parser.add_argument("--dump", help="also write the threads' profiles, merged, to this pstats file")
    args = parser.parse_args(argv)

    started = os.times()
    import_cpu = time.process_time()
    from media_crawler.commands import fetch_urls  # what a run imports before its first request
    from media_crawler.cli import main as cli_main
    import_cpu = time.process_time() - import_cpu

    profiles: list[cProfile.Profile] = []
    lock = threading.Lock()

    def profile_this_thread(*_args) -> None:
        sys.setprofile(None)
        profile = cProfile.Profile(time.thread_time)
        with lock:
            profiles.append(profile)
        profile.enable()

    with tempfile.TemporaryDirectory(prefix="bench-profile-") as scratch:
        store = args.store or os.path.join(scratch, "store")
        origin = args.feed.split("/", 3)
        allow = args.allow_host or ["/".join(origin[:3])]
        command = ["fetch-urls", "--feed", args.feed, "--store", store, "--workers", str(args.workers),
                   "--processes", "1", *(arg for host in allow for arg in ("--allow-host", host))]
        main_profile = cProfile.Profile(time.thread_time)
        profiles.append(main_profile)
        threading.setprofile(profile_this_thread)
        main_profile.enable()
        stdout, sys.stdout = sys.stdout, open(os.devnull, "w")  # the run's JSON lines
        try:
            code = cli_main(command)
        finally:
            main_profile.disable()
            threading.setprofile(None)
            sys.stdout.close()
            sys.stdout = stdout
    del fetch_urls
    ended = os.times()

    by_concern: dict[str, float] = defaultdict(float)
    others: dict[str, float] = defaultdict(float)
    for profile in profiles:
        for entry in profile.getstats():
            concern = concern_of(entry.code)
            by_concern[concern] += entry.inlinetime
            if concern == OTHER:
                where = entry.code
                others[where if isinstance(where, str) else f"{where.co_filename}:{where.co_name}"] += entry.inlinetime
    profiled = sum(by_concern.values())
    total = (ended.user - started.user) + (ended.system - started.system)
    print(f"fetch-urls {args.feed}: exit {code}; process CPU {total:.2f} s (user+sys, profiler included)")
    print()
    print("| where the CPU goes | s (thread CPU, profiled) | share |")
    print("|---|---|---|")
    by_concern["import and start-up"] += import_cpu  # the command's own imports, before the profile
    for concern, seconds in sorted(by_concern.items(), key=lambda pair: -pair[1]):
        print(f"| {concern} | {seconds:.2f} | {seconds / (profiled + import_cpu):.0%} |")
    for where, seconds in sorted(others.items(), key=lambda pair: -pair[1])[:args.detail]:
        print(f"  other: {seconds:.3f} s  {where}")
    if args.dump:
        import pstats

        pstats.Stats(*profiles).dump_stats(args.dump)  # the threads have ended: their profiles only read
    return code


if __name__ == "__main__":
    sys.exit(main())

"""What `media-crawler fetch-urls` spends before its first request (issue 31: within 0.15 s).

    python -m bench startup [--runs 5] [--items 20] [--python PATH] [--instructions]

Serves a feed of --items small files on 127.0.0.1 and runs fetch-urls over it
into a fresh store, --runs times. Per run: the wall time from just before exec
to the server's accept of the feed connection and to its reading of the first
media GET (which may come over the feed's kept-alive connection: no accept of its
own) (one clock, CLOCK_MONOTONIC, on both sides), and the fetch-urls process's
CPU (`time.process_time`, from the process's start) at its first and second
`socket.connect` (an audit hook, installed by the `-c` launcher before
media_crawler is imported): the feed's, and the first a download opens.
Medians and ranges (the low end is the best of N); run it at `nice -n 19` and
read CPU, not wall, on a busy machine.

--instructions: instead, the instructions the fetch-urls process executes (all its
threads) up to its first connect and up to its second, counted by
`valgrind --tool=callgrind` of a run that ends itself (`os._exit`) at that connect:
what the machine's load does not move. Compile the bytecode first
(`python -m compileall -q media_crawler`) when PYTHONDONTWRITEBYTECODE is set, or every
run counts the compiler too.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# The child: an audit hook noting CPU and clock at each connect, then the console script's main.
LAUNCHER = """
import json, os, sys, time
_marks, _out = [], os.environ["STARTUP_MARKS"]
def _hook(event, args):
    if event == "socket.connect" and len(_marks) < 2:
        _marks.append((time.process_time(), time.monotonic()))
        with open(_out, "w") as f:
            json.dump(_marks, f)
sys.addaudithook(_hook)
from media_crawler.cli import console_main
console_main()
"""

# The child under callgrind: ends the process at the STARTUP_EXIT_AT-th connect, before it is made.
EXIT_AT_CONNECT = """
import os, sys
_left = [int(os.environ["STARTUP_EXIT_AT"])]
def _hook(event, args):
    if event == "socket.connect":
        _left[0] -= 1
        if not _left[0]:
            os._exit(0)
sys.addaudithook(_hook)
from media_crawler.cli import console_main
console_main()
"""


def small_jpeg() -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (32, 32), (200, 80, 40)).save(out, "JPEG")
    return out.getvalue()


BODY = small_jpeg()


class Corpus(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, items: int) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.items = items
        self.accepts: list[tuple[float, str]] = []
        self.gets: list[tuple[float, str]] = []  # (when, path) of each GET, as its request line is read

    def get_request(self):
        connection = super().get_request()
        self.accepts.append((time.monotonic(), ""))
        return connection


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        server: Corpus = self.server  # type: ignore[assignment]
        server.gets.append((time.monotonic(), self.path))
        if self.path == "/feed.json":
            base = f"http://127.0.0.1:{server.server_address[1]}"
            body = json.dumps({"items": [{"url": f"{base}/m/{i}.bin"} for i in range(server.items)]}).encode()
            kind = "application/json"
        else:
            body, kind = BODY, "image/jpeg"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def one_run(python: str, server: Corpus, work: Path, index: int) -> dict[str, float]:
    port = server.server_address[1]
    marks = work / f"marks{index}"
    store = work / f"store{index}"
    command = [python, "-c", LAUNCHER, "fetch-urls", "--feed", f"http://127.0.0.1:{port}/feed.json",
               "--store", str(store), "--allow-host", f"127.0.0.1:{port}", "--workers", "8", "--processes", "1"]
    server.accepts.clear()
    server.gets.clear()
    started = time.monotonic()
    done = subprocess.run(command, env={**os.environ, "STARTUP_MARKS": str(marks)},
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    if done.returncode != 0:
        raise SystemExit(f"fetch-urls failed: {done.stderr.decode()[-2000:]}")
    cpu = [mark[0] for mark in json.loads(marks.read_text())]
    accepts = sorted(at for at, _ in server.accepts)
    media_get = min(at for at, path in server.gets if path != "/feed.json")
    return {"feed_accept_ms": (accepts[0] - started) * 1000, "media_get_ms": (media_get - started) * 1000,
            "feed_cpu_ms": cpu[0] * 1000, "connect2_cpu_ms": cpu[1] * 1000}


def instructions_to_connect(python: str, server: Corpus, work: Path, nth: int, keep: Path | None = None) -> int:
    """The instructions fetch-urls executes before its nth connect (callgrind's total);
    keep: the folder to leave callgrind's file in (callgrind_annotate reads it)."""
    port = server.server_address[1]
    out = (keep or work) / f"callgrind.startup.{nth}"
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", python, "-c", EXIT_AT_CONNECT,
               "fetch-urls", "--feed", f"http://127.0.0.1:{port}/feed.json", "--store", str(work / f"store{nth}"),
               "--allow-host", f"127.0.0.1:{port}", "--workers", "8", "--processes", "1"]
    done = subprocess.run(command, env={**os.environ, "STARTUP_EXIT_AT": str(nth)},
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    totals = [line for line in out.read_text().splitlines() if line.startswith(("summary:", "totals:"))] \
        if out.exists() else []
    if done.returncode != 0 or not totals:
        raise SystemExit(f"fetch-urls under callgrind failed: {done.stderr.decode()[-2000:]}")
    return int(totals[0].split()[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench startup", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions to the first and second connect (callgrind), not time")
    parser.add_argument("--keep", type=Path, help="with --instructions: leave callgrind's files in this folder")
    args = parser.parse_args(argv)
    server = Corpus(args.items)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    rows = []
    with tempfile.TemporaryDirectory(prefix="startup-") as work:
        if args.instructions:
            for nth, what in ((1, "the feed's connect"), (2, "the second connect")):
                print(f"instructions to {what}: {instructions_to_connect(args.python, server, Path(work), nth, args.keep):,}")
            server.shutdown()
            return 0
        for index in range(args.runs):
            rows.append(one_run(args.python, server, Path(work), index))
    server.shutdown()
    for key in rows[0]:
        values = sorted(row[key] for row in rows)
        print(f"{key:16} median {statistics.median(values):7.1f}  range {values[0]:7.1f} - {values[-1]:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

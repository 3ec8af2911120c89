"""The least a downloader can do and still keep every guarantee the project gives: a floor.

Per file, only what issue 31 counts as the guarantees' cost (and issue 4 and
../shared/GUIDE.md require of every blob): stream the body to a `.part` in a
staging folder, sha256 while writing, fsync, a full entropy decode of every image
whatever its hash (JPEG through `draft()` at 1/8 scale, as verify/images.py does;
other images `load()`), link it into `sha256/ab/cd/<sha256>` (making the
folders), and one ledger row per item: rows are written in batches of 100 to
SQLite, each batch after one `syncfs` that makes its links durable (what
fetch-urls does since issue 31). Two processes by default, as fetch-urls on 2
cores. Nothing else: no retries, no URL policy, no logs, no format check beyond
the image decode (videos are hashed and stored only), no SQLAlchemy (sqlite3
directly).

Run through the peer harness as the "project" tool, the same corpus in the same
run as the peers (bench/run.sh's `floor` phase). Every figure of the project is
then a ratio to this one, measured in the same run.

The HTTP is plain `http.client` keep-alive, one connection per thread: the least
a keep-alive GET costs in Python. Through requests (until issue 31's second pass)
the floor itself cost ~1.6 ms of user CPU per small file instead of ~0.6 (its
session, urllib3's urlopen and response objects, iter_content), and ~20 % more
CPU on the main set (bench/RESULTS.md).
(Decoding a small body from the bytes in memory instead of reading the .part back
was measured too: no difference on either set, so the floor reads back, as
fetch-urls does.)

    python -m bench floor --feed URL --store DIR [--workers 8] [--processes 2]
"""
import argparse
import ctypes
import hashlib
import http.client
import io
import json
import os
import sqlite3
import sys
import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

from PIL import Image

BATCH = 100


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--feed", required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args(argv)
    with urllib.request.urlopen(args.feed, timeout=30) as feed:
        items = json.load(feed)["items"]
    staging = os.path.join(args.store, "staging")
    blobs = os.path.join(args.store, "sha256")
    os.makedirs(staging, exist_ok=True)
    os.makedirs(blobs, exist_ok=True)
    ledger = os.path.join(args.store, "ledger.db")
    with sqlite3.connect(ledger) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE IF NOT EXISTS items (url TEXT PRIMARY KEY, sha256 TEXT, size INTEGER, state TEXT)")
    children = []
    for shard in range(1, args.processes):  # shard i: items i, i+P, ... (fetch-urls shards by ledger id)
        pid = os.fork()
        if pid == 0:
            os._exit(_download_all(items[shard::args.processes], args.store, ledger,
                                   max(1, args.workers // args.processes)))
        children.append(pid)
    failed = _download_all(items[0::args.processes], args.store, ledger, max(1, args.workers // args.processes))
    for pid in children:
        failed += os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    print(json.dumps({"files": len(items), "failed_shards": failed}))
    return 1 if failed else 0


def _download_all(items, store, ledger, threads) -> int:
    staging, blobs = os.path.join(store, "staging"), os.path.join(store, "sha256")
    local = threading.local()
    rows = _Rows(store, ledger)

    def fetch(index_item):
        index, item = index_item
        part = os.path.join(staging, f"{os.getpid()}-{index}.part")
        digest = hashlib.sha256()
        size = 0
        response = _get(local, item["url"])
        with open(part, "w+b", buffering=0) as handle:
            while chunk := response.read1(1 << 20):
                digest.update(chunk)
                handle.write(chunk)
                size += len(chunk)
            if response.length:  # cut short: http.client reads b"" at a closed socket
                raise http.client.IncompleteRead(b"", response.length)
            response.close()  # the body is read: the connection is free for the next GET
            os.fsync(handle.fileno())
            handle.seek(0)
            _decode(io.BufferedReader(handle))
        name = digest.hexdigest()
        folder = os.path.join(blobs, name[:2], name[2:4])
        target = os.path.join(folder, name)
        try:
            os.link(part, target)
        except FileNotFoundError:
            os.makedirs(folder, exist_ok=True)
            try:
                os.link(part, target)
            except FileExistsError:
                pass
        except FileExistsError:
            pass
        rows.add((item["url"], name, size, "committed"), part)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(fetch, enumerate(items)))
    rows.flush()
    return 0


def _get(local: threading.local, url: str) -> http.client.HTTPResponse:
    """GET url over this thread's kept-alive connection to its origin (reopened once if the server closed it)."""
    parts = urlsplit(url)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    for attempt in (0, 1):
        connection = getattr(local, "connection", None)
        if connection is None or local.origin != (parts.scheme, parts.netloc):
            kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
            connection = local.connection = kind(parts.netloc, timeout=30)
            local.origin = (parts.scheme, parts.netloc)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            connection.close()
            local.connection = None
            if attempt:
                raise
            continue
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status} from {url}")
        return response
    raise AssertionError("unreachable")


def _decode(handle) -> None:
    """Every image entropy-decoded, whatever its hash; anything else is stored as it is."""
    head = handle.peek(12)[:12]
    if not (head.startswith(b"\xff\xd8") or head.startswith(b"\x89PNG") or head[:4] == b"GIF8"
            or (head[:4] == b"RIFF" and head[8:12] == b"WEBP")):
        return
    with Image.open(handle) as image:
        if image.format == "JPEG":
            image.draft("RGB", (max(1, image.width // 8), max(1, image.height // 8)))
        image.load()


class _Rows:
    """One ledger row per item, written BATCH at a time after one syncfs of the store."""

    def __init__(self, store: str, ledger: str) -> None:
        self.store = store
        self.db = sqlite3.connect(ledger, check_same_thread=False, isolation_level=None, timeout=30)
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.pending: list[tuple] = []
        self.parts: list[str] = []
        self.lock = threading.Lock()
        self.syncfs = getattr(ctypes.CDLL(None, use_errno=True), "syncfs", None)

    def add(self, row: tuple, part: str) -> None:
        with self.lock:
            self.pending.append(row)
            self.parts.append(part)
            if len(self.pending) >= BATCH:
                self._write()

    def flush(self) -> None:
        with self.lock:
            self._write()

    def _write(self) -> None:
        if not self.pending:
            return
        fd = os.open(self.store, os.O_RDONLY | os.O_DIRECTORY)
        try:
            if self.syncfs is None or self.syncfs(fd) != 0:
                os.sync()
        finally:
            os.close(fd)
        for part in self.parts:
            os.unlink(part)
        self.db.execute("BEGIN IMMEDIATE")
        self.db.executemany("INSERT OR REPLACE INTO items VALUES (?, ?, ?, ?)", self.pending)
        self.db.execute("COMMIT")
        self.pending.clear()
        self.parts.clear()


if __name__ == "__main__":
    sys.exit(main())

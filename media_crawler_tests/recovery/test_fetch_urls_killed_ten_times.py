"""Acceptance: `fetch-urls` SIGKILLed 10 times mid-run, then run once more, leaves exactly what a clean run leaves.

A local server on 127.0.0.1 serves a feed of 300 small PNGs (half of the entries
announce their sha256 and size, half do not) with a little latency per file, so
a run lasts a couple of seconds. The console script runs as a subprocess in its
own process group (its forked shard processes too) and the whole group is
SIGKILLed at varied moments: while it reads the feed, and after a varying number
of media answers. Each kill is followed by a restart; after the tenth, one run
is let finish. Compared with a clean run into another store: the same blob
paths and bytes under sha256/, the same ledger rows (item_id, variant, state,
sha256), and nothing at all under staging/.

A kill between the store's link and the unlink of the staging name leaves
staging/task-<id>.part as a second name of a committed blob; only a run that
removes such names (store/staging.py `remove_committed_staging`, called by
the download stage) converges without `reconcile --repair`.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from PIL import Image
from sqlalchemy import create_engine, select

from media_crawler.store.schema import tasks as T

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups and fork (Linux)")

FILES = 300
LATENCY_S = 0.01
KILLS = 10
SEED = 20261127
CLI = Path(sys.executable).with_name("media-crawler")


def png(index: int) -> bytes:
    image = Image.new("RGB", (16 + index % 9, 12 + index % 5), (index % 256, index * 7 % 256, index * 13 % 256))
    image.putpixel((0, 0), (index // 256, 1, 2))  # distinct bytes for every index
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


class FeedServer:
    """The feed and its media; counts the media answers sent (a kill is timed by them)."""

    def __init__(self, files: int = FILES, latency_s: float = LATENCY_S) -> None:
        self.files = {f"/media/{index}.png": png(index) for index in range(files)}
        items = []
        for index, (path, body) in enumerate(self.files.items()):
            item = {"url": path}
            if index % 2:
                item.update(sha256=hashlib.sha256(body).hexdigest(), size=len(body))
            items.append(item)
        self.feed = json.dumps({"items": items}).encode()
        self.media_answers = 0
        self.feed_answers = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                path = self.path.split("?", 1)[0]
                if path == "/feed.json":
                    body, kind = server.feed, "application/json"
                    with server._lock:
                        server.feed_answers += 1
                elif path in server.files:
                    time.sleep(latency_s)
                    body, kind = server.files[path], "image/png"
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    return  # the client was killed
                if kind == "image/png":
                    with server._lock:
                        server.media_answers += 1

        class QuietServer(ThreadingHTTPServer):
            def handle_error(self, request, client_address) -> None:
                pass  # a killed client resets its connections: expected here

        self.httpd = QuietServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> "FeedServer":
        self.thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"


def command(server: FeedServer, store: Path, processes: int | None = None) -> list[str]:
    args = [str(CLI), "fetch-urls", "--feed", f"{server.origin}/feed.json", "--store", str(store),
            "--allow-host", server.origin, "--workers", "8"]
    return args + (["--processes", str(processes)] if processes else [])


def start(args: list[str], log: Path) -> subprocess.Popen:
    env = {key: value for key, value in os.environ.items() if key != "MEDIA_CRAWLER_LEDGER_URL"}
    with open(log, "ab") as out:
        # Its own process group: the kill takes the shard processes it forks too, as an
        # OOM kill of the service or a power cut would.
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)


def kill_group(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:  # the forked shards go with it (zombies of init at worst)
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)


def wait_for(condition, process: subprocess.Popen, timeout_s: float = 20.0) -> bool:
    """Until condition() (True) or the process ended by itself (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        if process.poll() is not None:
            return False
        time.sleep(0.002)
    raise AssertionError("the run neither reached the kill moment nor ended")


def blobs(store: Path) -> dict[str, bytes]:
    root = store / "sha256"
    return {str(path.relative_to(root)): path.read_bytes() for path in root.glob("*/*/*") if path.is_file()}


def ledger_rows(store: Path) -> set[tuple]:
    engine = create_engine(f"sqlite:///{store / 'ledger.db'}")
    try:
        with engine.connect() as conn:
            return {tuple(row) for row in conn.execute(select(T.c.item_id, T.c.variant, T.c.state, T.c.sha256))}
    finally:
        engine.dispose()


def staging_names(store: Path) -> list[str]:
    staging = store / "staging"
    return sorted(path.name for path in staging.iterdir()) if staging.is_dir() else []


def test_fetch_urls_killed_ten_times_then_run_once_more_equals_a_clean_run(tmp_path):
    rng = random.Random(SEED)
    with FeedServer() as server:
        clean = tmp_path / "clean"
        done = subprocess.run(command(server, clean), capture_output=True, timeout=120,
                              env={k: v for k, v in os.environ.items() if k != "MEDIA_CRAWLER_LEDGER_URL"})
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        expected_blobs, expected_rows = blobs(clean), ledger_rows(clean)
        assert len(expected_blobs) == FILES and {row[2] for row in expected_rows} == {"committed"}
        assert staging_names(clean) == []

        store, log = tmp_path / "killed", tmp_path / "killed.log"
        moments, kills, linked_after_kills = [], 0, 0
        for number in range(KILLS):
            # Vary the process count across restarts (a restart after a deploy may differ).
            process = start(command(server, store, processes=1 if number % 3 == 2 else None), log)
            if number in (0, 5):  # while it reads the feed and records it
                feeds = server.feed_answers
                moment = ("after the feed", lambda: server.feed_answers > feeds)
            else:  # mid-download: after a varying number of media answers
                target = server.media_answers + rng.randint(3, 30)
                moment = (f"after {target} media answers", lambda: server.media_answers >= target)
            if wait_for(moment[1], process):
                time.sleep(rng.uniform(0.0, 0.05))
                kill_group(process)
                kills += 1
                moments.append(moment[0])
            else:
                assert process.returncode == 0  # it finished before the moment came: not a kill
            staging = store / "staging"
            linked_after_kills = max(linked_after_kills, sum(
                1 for path in (staging.iterdir() if staging.is_dir() else []) if path.stat().st_nlink > 1))
        print(f"kills: {kills} ({'; '.join(moments)}); at most {linked_after_kills} staging name(s) "
              f"linked to a committed blob after a kill; media answers in all: {server.media_answers}")
        assert kills >= 8, "most runs must be killed mid-run, not finish first"

        final = subprocess.run(command(server, store), capture_output=True, timeout=120,
                               env={k: v for k, v in os.environ.items() if k != "MEDIA_CRAWLER_LEDGER_URL"})
        assert final.returncode == 0, final.stderr.decode()[-2000:]

    assert staging_names(store) == [], "the finished store keeps staging names (clean run: none)"
    got = blobs(store)
    assert set(got) == set(expected_blobs), {"missing": sorted(set(expected_blobs) - set(got))[:5],
                                             "extra": sorted(set(got) - set(expected_blobs))[:5]}
    assert got == expected_blobs, "same paths, different bytes"
    assert ledger_rows(store) == expected_rows

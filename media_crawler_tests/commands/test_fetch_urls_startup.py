"""fetch-urls' first request goes out before the heavy imports (issue 31's start-up).

Not timed: the child `media-crawler fetch-urls` notes, at its first `socket.connect`
(an audit hook, installed before media_crawler is imported), which modules are loaded
and which thread first looked each one up. The ledger's SQLAlchemy may be on its way
in the ledger's own opening thread (pipeline/runtime.py `LedgerOpening`, started as the
feed request goes out), never in the thread that sends the request; Dagster, Pillow, the
simulator, yaml, the download engine and the verifiers are not loaded at all, nor is
requests (with the character-set guessers it imports): the feed goes over urllib3
(platforms/plain_transport.py, the urls spec's `plain_api`). Nor are other platforms'
response hooks (the whole run never loads Facebook's: `test_a_whole_list_is_fetched_without_requests`)
or SQLAlchemy's PostgreSQL dialect (the ledger is SQLite).
"""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

# The child: a finder that notes the thread of each top-level module's first look-up, an
# audit hook that writes what is loaded at the first connect, then the console script.
CHILD = """
import json, sys, threading
first_thread = {}

class NoteThread:
    def find_spec(self, name, path=None, target=None):
        first_thread.setdefault(name, threading.current_thread().name)
        return None

sys.meta_path.insert(0, NoteThread())
out = sys.argv.pop(1)

def at_first_connect(event, args):
    if event == "socket.connect" and not first_thread.get("<connected>"):
        first_thread["<connected>"] = threading.current_thread().name
        with open(out, "w") as f:
            # copies taken in C (atomic under the GIL): the ledger thread may import meanwhile
            json.dump({"loaded": sorted(sys.modules), "first_thread": dict(first_thread)}, f)

sys.addaudithook(at_first_connect)
from media_crawler.cli import console_main
console_main()
"""

# Not loaded by the first request, in any thread.
NOT_YET = ("dagster", "PIL", "media_crawler_sim", "yaml", "multiprocessing",
           "media_crawler.pipeline.download", "media_crawler.pipeline.list_downloads",
           "media_crawler.download.fetcher", "media_crawler.verify",
           "requests", "chardet", "charset_normalizer", "media_crawler.sessions",
           "media_crawler.platforms.transport",
           # Not by a URL list at all: another platform's response hook (Runtime._response_hook),
           # and, for a SQLite ledger, SQLAlchemy's PostgreSQL dialect (schema.PARTIAL_INDEXES;
           # test_migrations.py checks the ledger's whole opening in a process of its own).
           "media_crawler.platforms.facebook.usage", "sqlalchemy.dialects.postgresql")
# Loaded by then only in the ledger's opening thread, if at all.
OPENING_ONLY = ("sqlalchemy", "media_crawler.store.ledger")


class FeedHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        body = json.dumps({"items": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def feed_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FeedHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def loaded_at_first_request(tmp_path, port: int) -> dict:
    out = tmp_path / "at_first_connect.json"
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(out), "fetch-urls", "--feed", f"http://127.0.0.1:{port}/feed.json",
         "--store", str(tmp_path / "store"), "--allow-host", f"127.0.0.1:{port}", "--processes", "1"],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "no items" in result.stderr  # the feed was read, and the run finished
    return json.loads(out.read_text())


def test_the_feed_request_goes_out_before_the_heavy_imports(tmp_path, feed_server):
    seen = loaded_at_first_request(tmp_path, feed_server)
    loaded, first_thread = set(seen["loaded"]), seen["first_thread"]
    assert first_thread["<connected>"] == "MainThread"  # the feed request, from discover
    assert "media_crawler.pipeline.discover" in loaded  # the probe saw the crawler's own request
    early = sorted(name for name in loaded if any(name == top or name.startswith(f"{top}.") for top in NOT_YET))
    assert early == []
    for name in OPENING_ONLY:
        if name in loaded:
            assert first_thread[name] == "ledger-open", f"{name} imported by {first_thread[name]}"


# The child of a whole run: requests cannot be imported at all (None in sys.modules
# makes every `import requests` an ImportError).
WITHOUT_REQUESTS = """
import sys
sys.modules["requests"] = None
# Nor Facebook's response hook, anywhere in the run: a URL list has none (Runtime._response_hook).
sys.modules["media_crawler.platforms.facebook.usage"] = None
from media_crawler.cli import console_main
console_main()
"""


def small_jpeg(shade: int) -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (16, 16), (30, 120, shade)).save(out, "JPEG")
    return out.getvalue()


class ListHandler(BaseHTTPRequestHandler):
    """A feed of three images (gzip-compressed when asked, as a feed server may), and the images."""

    protocol_version = "HTTP/1.1"
    images: dict[str, bytes] = {}

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        headers = {}
        if self.path == "/feed.json":
            base = f"http://127.0.0.1:{self.server.server_address[1]}"
            body = json.dumps({"items": [{"url": f"{base}/m/{index}.jpg"} for index in range(3)]}).encode()
            kind = "application/json"
            if "gzip" in (self.headers.get("Accept-Encoding") or ""):
                body, headers["Content-Encoding"] = gzip.compress(body), "gzip"
        else:
            body, kind = self.images[self.path], "image/jpeg"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def test_a_whole_list_is_fetched_without_requests(tmp_path):
    """The feed (gzip-encoded) and every download go over urllib3: with requests not
    importable, the run still commits the whole list."""
    ListHandler.images = {f"/m/{index}.jpg": small_jpeg(40 * index) for index in range(3)}
    server = ThreadingHTTPServer(("127.0.0.1", 0), ListHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        result = subprocess.run(
            [sys.executable, "-c", WITHOUT_REQUESTS, "fetch-urls", "--feed", f"http://127.0.0.1:{port}/feed.json",
             "--store", str(tmp_path / "store"), "--allow-host", f"127.0.0.1:{port}", "--processes", "1"],
            capture_output=True, text=True, timeout=120)
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 0, result.stderr
    assert "fetch-urls: committed=3;" in result.stderr, result.stderr

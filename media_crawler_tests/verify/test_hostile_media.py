"""The hostile-media corpus end to end: fetched by `fetch-urls` (a subprocess)
and by a Dagster `crawl`, with and without announced hashes, plus answers that lie
about their size and a gzip bomb: 0 committed blobs that fail an independent full decode,
0 tracebacks, 0 staging leftovers (fetch-urls's peak RSS on it: bench/limits.py)."""
from __future__ import annotations

import hashlib
import io
import json
import os
import sqlite3
import subprocess
import sys
import threading
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from PIL import Image

from media_crawler_tests.real_ffmpeg import decodes_cleanly, ffmpeg_exe
from media_crawler_tests.verify.hostile_media import gzip_bomb, media_corpus, real_videos

BOMB = gzip_bomb()
STREAM_LIMIT = 256 * 1024**2  # a lying server stops by itself after this
ANSWERS = {  # name -> (kind, declared size): answers whose headers or length lie
    "lie_content_length": ("image", 10_000),  # Content-Length 2 GiB announced up front
    "lie_runs_past_declared": ("image", 10_000),  # no length, the body keeps coming
    "gzip_bomb_declared": ("image", 10_000),  # 512 MiB of zeros in ~0.5 MiB of gzip
    "gzip_bomb_undeclared": ("image", None),
}
MEDIA_BIN = Path(sys.executable).with_name("media-crawler")


class _Hostile(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        name = self.path.rsplit("/", 1)[-1]
        if self.path.startswith("/feed"):
            return self._send(200, self.server.feeds[name].encode(), "application/json")
        corpus = self.server.corpus
        if name in corpus:
            return self._send(200, corpus[name][0], "application/octet-stream")
        if name == "lie_content_length":
            return self._stream({"Content-Length": str(2 * 1024**3)})
        if name == "lie_runs_past_declared":
            return self._stream({"Connection": "close"})
        if name.startswith("gzip_bomb"):
            return self._send(200, BOMB, "image/jpeg", {"Content-Encoding": "gzip"})
        return self._send(404, b"no", "text/plain")

    def _send(self, status, body, content_type, extra=None) -> None:
        self.send_response(status)
        for key, value in {"Content-Type": content_type, "Content-Length": str(len(body)), **(extra or {})}.items():
            self.send_header(key, value)
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass

    def _stream(self, headers) -> None:
        self.send_response(200)
        for key, value in {"Content-Type": "image/jpeg", **headers}.items():
            self.send_header(key, value)
        self.end_headers()
        jpeg_head = self.server.corpus["jpeg"][0][:600]
        sent, block = 0, jpeg_head + bytes(1024**2 - len(jpeg_head))
        try:
            while sent < STREAM_LIMIT:
                self.wfile.write(block)
                sent += len(block)
                block = bytes(1024**2)
        except OSError:
            pass  # the crawler hung up at its bound: what should happen
        self.close_connection = True


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        pass  # the crawler hanging up on a lying answer is the point


@pytest.fixture(scope="module")
def ffmpeg() -> str:
    return ffmpeg_exe()


@pytest.fixture(scope="module")
def corpus(ffmpeg, tmp_path_factory) -> dict[str, tuple[bytes, str, str]]:
    videos = real_videos(ffmpeg, tmp_path_factory.mktemp("videos"))
    return {name: (data, kind, verdict) for name, data, kind, verdict in media_corpus(videos)}


@pytest.fixture(scope="module")
def hostile_server(corpus):
    server = _QuietServer(("127.0.0.1", 0), _Hostile)
    server.daemon_threads = True
    server.feeds = {}
    server.corpus = corpus
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def feed(server, name: str, with_hashes: bool) -> str:
    base = f"http://127.0.0.1:{server.server_address[1]}"
    items = []
    for item_name, (data, kind, _verdict) in server.corpus.items():
        item = {"url": f"{base}/m/{item_name}", "type": kind, "size": len(data)}
        if with_hashes:
            item["sha256"] = hashlib.sha256(data).hexdigest()
        items.append(item)
    for item_name, (kind, declared) in ANSWERS.items():
        items.append({"url": f"{base}/a/{item_name}", "type": kind, **({"size": declared} if declared else {})})
    server.feeds[name] = json.dumps({"items": items})
    return f"{base}/feed/{name}"


def fully_decodes(path: Path, ffmpeg: str) -> bool:
    """An independent full decode, by decoders the product does not use for it: a video's
    every frame by ffmpeg, an image's every frame at full size by Pillow (no draft)."""
    head = path.read_bytes()[:16]
    if head[4:8] in (b"ftyp", b"styp", b"moof", b"sidx") or head.startswith(b"\x1a\x45\xdf\xa3"):
        return decodes_cleanly(ffmpeg, path)
    try:
        with Image.open(io.BytesIO(path.read_bytes())) as image:
            for index in range(getattr(image, "n_frames", 1)):
                image.seek(index)
                image.load()
        return True
    except Exception:  # noqa: BLE001 - any failure is the answer
        return False


def committed(store: Path, ledger: Path) -> dict[str, str]:
    with sqlite3.connect(ledger) as conn:
        rows = conn.execute("SELECT media_url, sha256 FROM mc_tasks WHERE state = 'committed'").fetchall()
    return {url.rsplit("/", 1)[-1]: sha for url, sha in rows}


def check_store(store: Path, ledger: Path, output: str, corpus: dict, ffmpeg: str) -> None:
    stored = committed(store, ledger)
    blobs = [path for path in (store / "sha256").rglob("*") if path.is_file()]
    undecodable = [path.name for path in blobs if not fully_decodes(path, ffmpeg)]
    assert blobs and undecodable == []
    wrongly = {name for name in stored if name not in corpus or corpus[name][2] == "refuse"}
    assert wrongly == set(), wrongly
    genuine = {name for name, (_d, _k, verdict) in corpus.items() if verdict == "store"}
    assert genuine <= set(stored), genuine - set(stored)  # the corpus is not refused wholesale
    leftovers = [p for p in (store / "staging").rglob("*") if p.is_file()] if (store / "staging").exists() else []
    assert leftovers == []
    assert "Traceback" not in output


def run_fetch_urls(url: str, store: Path, tmp_path: Path) -> tuple[str, str]:
    """`fetch-urls` over the feed in a process of its own; (stdout, stderr).
    Its peak RSS on this corpus is bench/limits.py's (hostile_fetch_rss)."""
    done = subprocess.run(
        [str(MEDIA_BIN), "fetch-urls", "--feed", url, "--store", str(store), "--allow-host", url,
         "--processes", "1", "--workers", "4", "--max-item-bytes", str(64 * 1024**2)],
        env={**os.environ, "MEDIA_CRAWLER_HOME": str(tmp_path)}, capture_output=True, text=True, timeout=240)
    return done.stdout, done.stderr


@pytest.mark.parametrize("with_hashes", [False, True], ids=["no_hashes", "announced_hashes"])
def test_fetch_urls_stores_only_media_that_decodes(hostile_server, ffmpeg, tmp_path, with_hashes):
    store = tmp_path / "store"
    url = feed(hostile_server, f"fetch-{with_hashes}", with_hashes)
    out, err = run_fetch_urls(url, store, tmp_path)
    check_store(store, store / "ledger.db", out + err, hostile_server.corpus, ffmpeg)
    assert "fetch-urls:" in err


def test_a_dagster_crawl_stores_only_media_that_decodes(hostile_server, ffmpeg, tmp_path, monkeypatch):
    from dagster import DagsterInstance

    from media_crawler.commands.crawl import crawl
    from media_crawler.defs import assets

    monkeypatch.setattr(assets, "DOWNLOAD_RETRY_WAIT_S", 0.0)  # the step's retries, without 35 s of their waits
    url = feed(hostile_server, "crawl", True)
    config = {"sources": [{"urls": url}], "allow_hosts": [url], "store": str(tmp_path / "store"),
              "ledger_url": f"sqlite:///{tmp_path / 'ledger.db'}", "max_item_bytes": 64 * 1024**2}
    path = tmp_path / "sources.yaml"
    path.write_text(yaml.safe_dump(config))
    monkeypatch.setenv("MEDIA_CRAWLER_HOME", str(tmp_path))
    day = datetime.now(timezone.utc).date().isoformat()
    with DagsterInstance.ephemeral() as instance:
        outcome = crawl(path, [day], instance=instance)
    assert outcome.partitions, outcome
    check_store(tmp_path / "store", tmp_path / "ledger.db", "\n".join(p.error for p in outcome.partitions),
                hostile_server.corpus, ffmpeg)

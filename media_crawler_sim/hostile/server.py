"""An HTTP server for the hostile-media corpus: each corpus entry at `/m/<name>`, answers
whose headers or length lie at `/a/<name>` (a 2 GiB Content-Length, a body that never
ends, gzip bombs), and URL-list feeds over both at `/feed/<name>` (`feed()`).

    with HostileServer(corpus) as server:
        url = server.feed("run-1", with_hashes=True)
"""
from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from media_crawler_sim.hostile.corpus import gzip_bomb

STREAM_LIMIT = 256 * 1024**2  # a lying answer stops by itself after this
ANSWERS = {  # name -> (kind, declared size): answers whose headers or length lie
    "lie_content_length": ("image", 10_000),  # Content-Length 2 GiB announced up front
    "lie_runs_past_declared": ("image", 10_000),  # no length, the body keeps coming
    "gzip_bomb_declared": ("image", 10_000),  # 512 MiB of zeros in ~0.5 MiB of gzip
    "gzip_bomb_undeclared": ("image", None),
}


class _Hostile(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "HostileServer"

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
            return self._send(200, self.server.bomb, "image/jpeg", {"Content-Encoding": "gzip"})
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


class HostileServer(ThreadingHTTPServer):
    """corpus: name -> (bytes, kind, verdict), as `dict` of corpus.media_corpus()'s entries."""

    daemon_threads = True

    def __init__(self, corpus: dict[str, tuple[bytes, str, str]], host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__((host, port), _Hostile)
        self.corpus = corpus
        self.feeds: dict[str, str] = {}
        self.bomb = gzip_bomb()
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request, client_address) -> None:
        pass  # the crawler hanging up on a lying answer is the point

    def feed(self, name: str, with_hashes: bool) -> str:
        """A URL-list feed of every corpus entry and lying answer; with_hashes: each item
        announces its sha256 (a crawler may then skip what it has, never what it verifies)."""
        items = []
        for item_name, (data, kind, _verdict) in self.corpus.items():
            item = {"url": f"{self.base_url}/m/{item_name}", "type": kind, "size": len(data)}
            if with_hashes:
                item["sha256"] = hashlib.sha256(data).hexdigest()
            items.append(item)
        for item_name, (kind, declared) in ANSWERS.items():
            items.append({"url": f"{self.base_url}/a/{item_name}", "type": kind,
                          **({"size": declared} if declared else {})})
        self.feeds[name] = json.dumps({"items": items})
        return f"{self.base_url}/feed/{name}"

    def __enter__(self) -> "HostileServer":
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()

"""A scripted HTTP server on 127.0.0.1 for download tests: ranges, ETags, cuts, stalls, redirects.

Each path gets a list of `Reply` objects, used one per request in order; the
last one repeats. A Reply can honour Range/If-Range, cut the body at an
absolute file offset (connection closed early), stall at an offset (headers
and some bytes sent, then silence), omit Content-Length, or redirect.
Every request is logged with its headers and the body bytes sent, so tests can
assert what went over the wire (e.g. resume sent < 1.2x the file).
"""
from __future__ import annotations

import re
import socket
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

WRITE_BLOCK = 64 * 1024
STALL_LIMIT_S = 10.0  # a stalled reply gives up after this even if the test forgot to stop


@dataclass(frozen=True)
class Reply:
    body: bytes = b""
    status: int = 200
    content_type: str = "application/octet-stream"
    etag: str | None = None
    last_modified: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    honour_range: bool = True
    cut_at: int | None = None  # absolute offset in `body` where the connection drops
    stall_at: int | None = None  # absolute offset where the server stops sending
    send_length: bool = True  # False: no Content-Length, the body ends when the connection closes
    redirect_to: str | None = None  # answer 302 with this Location


@dataclass(frozen=True)
class LoggedRequest:
    path: str
    query: str
    headers: dict[str, str]
    status: int
    body_bytes: int
    client_port: int  # the same port twice: the client reused its keep-alive connection


class ScriptedServer:
    def __init__(self) -> None:
        self._routes: dict[str, list[Reply]] = {}
        self._served: dict[str, int] = {}
        self._lock = threading.Lock()
        self.log: list[LoggedRequest] = []
        self.stop = threading.Event()
        self._httpd = _QuietServer(("127.0.0.1", 0), _Handler)
        self._httpd.scripted = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> "ScriptedServer":
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def route(self, path: str, *replies: Reply) -> str:
        """Script `path`; returns its URL."""
        with self._lock:
            self._routes[path] = list(replies)
            self._served[path] = 0
        return self.url(path)

    def requests_to(self, path: str) -> list[LoggedRequest]:
        with self._lock:
            return [entry for entry in self.log if entry.path == path]

    def body_bytes_sent(self, path: str) -> int:
        return sum(entry.body_bytes for entry in self.requests_to(path))

    def next_reply(self, path: str) -> Reply | None:
        with self._lock:
            replies = self._routes.get(path)
            if not replies:
                return None
            index = self._served[path]
            self._served[path] = index + 1
            return replies[min(index, len(replies) - 1)]

    def record(self, entry: LoggedRequest) -> None:
        with self._lock:
            self.log.append(entry)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        """Clients hanging up on keep-alive connections is normal here; anything else is printed."""
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real CDNs

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - silence stderr logging
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        server: ScriptedServer = self.server.scripted  # type: ignore[attr-defined]
        parts = urlsplit(self.path)
        reply = server.next_reply(parts.path) or Reply(b"no such path", status=404, content_type="text/plain")
        status, headers, start, end = self._plan(reply)
        # Logged before the first byte goes out: once the client has the
        # answer, a test may read the log at once.
        server.record(
            LoggedRequest(parts.path, parts.query, dict(self.headers.items()), status, end - start, self.client_address[1])
        )
        self._send_head(status, headers)
        if status in (200, 206):
            self._send_body(server, reply, start, end)
        elif end > start:
            self.wfile.write(reply.body)

    def _plan(self, reply: Reply) -> tuple[int, dict[str, str], int, int]:
        """(status, headers, first body offset, end offset) for this request."""
        if reply.redirect_to is not None:
            return 302, {"Location": reply.redirect_to, "Content-Length": "0"}, 0, 0
        headers = {**reply.headers, "Content-Type": reply.content_type}
        if reply.status != 200:
            return reply.status, {**headers, "Content-Length": str(len(reply.body))}, 0, len(reply.body)
        status, start, range_headers = self._range_answer(reply)
        if status == 416:
            return 416, {**range_headers, "Content-Length": "0"}, 0, 0
        headers.update(range_headers)
        if reply.send_length:
            headers["Content-Length"] = str(len(reply.body) - start)
        else:
            headers["Connection"] = "close"
            self.close_connection = True
        end = len(reply.body)
        for limit in (reply.cut_at, reply.stall_at):
            if limit is not None:
                end = min(end, max(limit, start))
        return status, headers, start, end

    def _range_answer(self, reply: Reply) -> tuple[int, int, dict[str, str]]:
        """(status, first body offset, validator and range headers) per Range / If-Range."""
        headers = {}
        if reply.etag:
            headers["ETag"] = reply.etag
        if reply.last_modified:
            headers["Last-Modified"] = reply.last_modified
        match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
        if not reply.honour_range or match is None:
            return 200, 0, headers
        if_range = self.headers.get("If-Range")
        if if_range is not None and if_range not in (reply.etag, reply.last_modified):
            return 200, 0, headers  # the client's copy is another version: send the whole new one
        start, total = int(match.group(1)), len(reply.body)
        if start >= total:
            headers["Content-Range"] = f"bytes */{total}"
            return 416, 0, headers
        headers["Content-Range"] = f"bytes {start}-{total - 1}/{total}"
        return 206, start, headers

    def _send_body(self, server: ScriptedServer, reply: Reply, start: int, end: int) -> None:
        try:
            for offset in range(start, end, WRITE_BLOCK):
                self.wfile.write(reply.body[offset : min(offset + WRITE_BLOCK, end)])
            self.wfile.flush()
            if end < len(reply.body) and reply.stall_at is not None:
                server.stop.wait(STALL_LIMIT_S)
                self._drop_connection()
            elif end < len(reply.body) or not reply.send_length:
                self._drop_connection()  # a cut, or the end of a body without Content-Length
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client hung up (e.g. too_large): fine

    def _send_head(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()

    def _drop_connection(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

"""Local HTTP servers for feeds that misbehave one fixed way: every GET the same answer,
or an answer worked out from the path."""
from __future__ import annotations

import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterator, Mapping

Answer = tuple[int, Mapping[str, str], bytes]  # status, headers, body


@contextmanager
def local_server(answer: Callable[[str], Answer]) -> Iterator[str]:
    """Serve `answer(path)` to every GET on 127.0.0.1, one thread per request; yields the origin URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            status, headers, body = answer(self.path)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def one_answer_server(status: int, body: bytes = b"", headers: Mapping[str, str] | None = None) -> Iterator[str]:
    """Serve `status`, `headers` and `body` to every GET on 127.0.0.1; yields the origin URL."""
    with local_server(lambda _path: (status, headers or {}, body)) as origin:
        yield origin

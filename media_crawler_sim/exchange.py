"""The request and response values route handlers work with, free of socket plumbing
so handlers are plain functions that tests can call directly."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

JSON_TYPE = "application/json; charset=utf-8"


@dataclass(frozen=True)
class Request:
    method: str  # GET | HEAD | POST
    path: str  # decoded path, no query
    pairs: tuple[tuple[str, str], ...]  # decoded query pairs, in order (WBI signs them all)
    headers: Mapping[str, str]  # case-insensitive lookups (http.client.HTTPMessage)
    base_url: str  # http://127.0.0.1:PORT, what answers link back to

    def param(self, name: str, default: str | None = None) -> str | None:
        for key, value in self.pairs:
            if key == name:
                return value
        return default

    def int_param(self, name: str, default: int | None = None) -> int | None:
        """An integer query parameter; ValueError when present but not a number."""
        value = self.param(name)
        return default if value in (None, "") else int(value)


@dataclass
class Response:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    # Fault injection: send the full Content-Length but only this many body bytes,
    # then drop the connection (a transfer cut mid-stream).
    cut_after: int | None = None
    # A body too big to hold (a generated world's truth): sent chunked as it is made.
    stream: Iterable[bytes] | None = None


def json_response(payload: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    return Response(status, body, {"Content-Type": JSON_TYPE, **(headers or {})})


def text_response(
    status: int, text: str, content_type: str = "text/plain; charset=utf-8", headers: Mapping[str, str] | None = None
) -> Response:
    return Response(status, text.encode(), {"Content-Type": content_type, **(headers or {})})


def not_found(path: str) -> Response:
    return text_response(404, f"404 Not Found: {path}\n")

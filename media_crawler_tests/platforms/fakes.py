"""Test doubles for the platform tests: fixture loading and a transport that
serves saved responses by URL path, recording every request it was sent."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping
from urllib.parse import parse_qsl, urlsplit

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.net.targets import parse_target
from media_crawler.platforms.base import ApiResponse

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def fixture_path(platform: str, name: str) -> Path:
    return FIXTURES / platform / name


def load_fixture(platform: str, name: str) -> Any:
    return json.loads(fixture_path(platform, name).read_text(encoding="utf-8"))


@dataclass
class SentRequest:
    platform: str
    url: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]


Handler = Callable[["SentRequest"], Any]  # returns a body (JSON-able) or an ApiResponse, or raises


class InTurn:
    """Answers served one per request, the last one repeating."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)

    def __call__(self, request: SentRequest) -> Any:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


@dataclass
class FakeTransport:
    """Routes on the URL path suffix (`routes["/x/web-interface/nav"] = body`);
    the longest matching suffix wins. A route is a body, an ApiResponse, or
    a handler (InTurn, a function of the SentRequest)."""

    routes: dict[str, Any] = field(default_factory=dict)
    sent: list[SentRequest] = field(default_factory=list)

    def get(
        self, platform: str, url: str, *, params: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None
    ) -> ApiResponse:
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        query.update({key: str(value) for key, value in (params or {}).items()})
        request = SentRequest(platform, url, parts.path, query, dict(headers or {}))
        self.sent.append(request)
        matches = [key for key in self.routes if parts.path.endswith(key)]
        if not matches:
            raise AssertionError(f"unexpected request to {parts.path}")
        route = self.routes[max(matches, key=len)]
        answer = route(request) if callable(route) else route
        if isinstance(answer, ApiResponse):
            return answer
        return ApiResponse(200, {"Content-Type": "application/json"}, json.dumps(answer, ensure_ascii=False), url)

    def paths(self) -> list[str]:
        return [request.path for request in self.sent]


def response(status: int, text: str, headers: Mapping[str, str] | None = None, url: str = "https://example.test/") -> ApiResponse:
    return ApiResponse(status, dict(headers or {}), text, url)


@dataclass
class CheckedTransport:
    """A transport for hostile answers: routes on the URL path suffix, a route being
    a list of answers served in turn (the last one repeating), an answer text or
    (status, text); unknown paths get `default`. Every URL first goes through the
    URL policy's parse, as RequestsTransport does, so a hostile `next` link is the
    CrawlError(disallowed_url) it is in production, not a test crash."""

    routes: dict[str, list]
    default: Any = "{}"
    sent: int = 0
    max_requests: int = 60

    def get(self, platform: str, url: str, *, params=None, headers=None) -> ApiResponse:
        self.sent += 1
        if self.sent > self.max_requests:  # paging that never ends: stop serving
            raise CrawlError(ErrorClass.RATE_LIMITED, "checked transport: too many requests")
        target = parse_target(url)
        path = urlsplit(target.url).path
        matches = [key for key in self.routes if path.endswith(key)]
        if matches:
            answers = self.routes[max(matches, key=len)]
            answer = answers.pop(0) if len(answers) > 1 else answers[0]
        else:
            answer = self.default
        status, text = answer if isinstance(answer, tuple) else (200, answer)
        return ApiResponse(status, {"Content-Type": "application/json"}, text, target.url)

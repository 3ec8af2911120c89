"""What every platform does with an ApiResponse before its own envelope rules:
HTTP statuses that mean the same everywhere, JSON decoding, header lookup.

Platform-specific codes live in `<platform>/errors.py`; these helpers are the
shared floor under them.
"""
from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.http import parse_retry_after
from media_crawler.platforms.base import ApiResponse
from media_crawler.scrub import scrub_text

RAW_BODY_LIMIT = 4096  # what a parse_error keeps of the body for the person who looks


def header(headers: Mapping[str, str] | None, name: str) -> str | None:
    """Case-insensitive header lookup (fakes hand in plain dicts)."""
    if not headers:
        return None
    if name in headers:
        return headers[name]
    lowered = name.lower()
    for key, value in headers.items():
        if key.lower() == lowered:
            return value
    return None


def parse_error(platform: str, message: str, raw_body: str | None = None, secrets: Iterable[str] = ()) -> CrawlError:
    """A parse_error carrying (a scrubbed prefix of) the raw body, which the
    pipeline stores for whoever investigates the schema drift."""
    error = CrawlError(ErrorClass.PARSE_ERROR, f"{platform}: {scrub_text(message, secrets)}")
    error.raw_body = scrub_text(raw_body[:RAW_BODY_LIMIT], secrets) if raw_body else None  # type: ignore[attr-defined]
    return error


def http_status_error(platform: str, response: ApiResponse) -> CrawlError | None:
    """The classes an HTTP status decides on its own, whatever the body says."""
    status = response.status
    where = f"{platform} HTTP {status} from {response.url}"
    if status == 429:
        retry_after = parse_retry_after(header(response.headers, "Retry-After"))
        return CrawlError(ErrorClass.RATE_LIMITED, where, http_status=status, retry_after=retry_after)
    if 500 <= status <= 599:
        return CrawlError(ErrorClass.HTTP_5XX, where, http_status=status)
    if status == 401:
        return CrawlError(ErrorClass.AUTH, where, http_status=status)
    if status in (404, 410):
        return CrawlError(ErrorClass.NOT_FOUND, where, http_status=status)
    return None


def decode_json(platform: str, response: ApiResponse, secrets: Iterable[str] = ()) -> Any:
    """The decoded body, or parse_error: an API that answers HTML or garbage
    with 200 has changed (or put up a wall), it is not a network blip."""
    try:
        return json.loads(response.text)
    except (ValueError, TypeError):
        snippet = (response.text or "")[:80].replace("\n", " ")
        raise parse_error(
            platform, f"HTTP {response.status} body from {response.url} is not JSON: {snippet!r}", response.text, secrets
        ) from None

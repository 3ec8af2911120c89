"""What every platform does with an ApiResponse before its own envelope rules:
HTTP statuses that mean the same everywhere, JSON decoding, header lookup.

Platform-specific codes live in `<platform>/errors.py`; these helpers are the
shared floor under them.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from media_crawler.errors import CrawlError, ErrorClass, status_error
from media_crawler.http import parse_retry_after
from media_crawler.platforms.base import ApiResponse
from media_crawler.platforms.safe_json import clean_text, loads, preview
from media_crawler.scrub import excerpt, scrub_text

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


def parse_error(platform: str, message: str, raw_body: Any = None, secrets: Iterable[str] = ()) -> CrawlError:
    """A parse_error carrying (a prefix of the scrubbed) raw body, which the
    pipeline stores for whoever investigates the schema drift.

    `raw_body` is the answer's text or the decoded object (rendered as JSON,
    whatever its depth); both end up valid UTF-8."""
    error = CrawlError(ErrorClass.PARSE_ERROR, f"{platform}: {scrub_text(clean_text(message), secrets)}")
    body = preview(raw_body, RAW_BODY_LIMIT, secrets) if raw_body is not None and raw_body != "" else None
    error.raw_body = body or None  # type: ignore[attr-defined]
    return error


def http_status_error(platform: str, response: ApiResponse) -> CrawlError | None:
    """The classes an HTTP status decides on its own, whatever the body says."""
    status = response.status
    return status_error(status, f"{platform} HTTP {status} from {response.url}", api=True,
                        retry_after=parse_retry_after(header(response.headers, "Retry-After")))


def decode_json(platform: str, response: ApiResponse, secrets: Iterable[str] = ()) -> Any:
    """The decoded body, or parse_error: an API that answers HTML or garbage
    with 200 has changed (or put up a wall), it is not a network blip. The
    decoder is safe_json's: NaN/Infinity, overflowing numbers and nesting past
    its bound are refused the same way, and strings come out valid UTF-8."""
    try:
        return loads(response.text)
    except (ValueError, TypeError) as exc:
        snippet = excerpt(response.text, 80, secrets).replace("\n", " ") if isinstance(response.text, str) else ""
        raise parse_error(
            platform, f"HTTP {response.status} body from {response.url} is not JSON ({_reason(exc)}): {snippet!r}",
            response.text if isinstance(response.text, str) else None, secrets,
        ) from None


def _reason(exc: Exception) -> str:
    return clean_text(excerpt(str(exc), 120))

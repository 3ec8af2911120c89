"""Graph API error bodies and HTTP answers → CrawlError.

`{error: {message, type, code, error_subcode, fbtrace_id, is_transient}}`:
- 4, 17, 32, 613, 80001-80014 (and any `is_transient: true`): throttled → rate_limited
- 190 (and 102, 463, 467 subcodes): the token is expired or invalid → auth
- 10, 200-299: a missing permission, permanent for the object → not_found
- 100/33: deleted or private (a tombstone); other 100s: an invalid request → not_found
- 368: blocked by policy → not_found
- 1, 2: "unknown error" / "service unavailable" → http_5xx (transient)
"""
from __future__ import annotations

from typing import Any, Iterable

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.http import parse_retry_after
from media_crawler.platforms.base import ApiResponse
from media_crawler.platforms.fields import as_int, as_str
from media_crawler.platforms.responses import decode_json, header, http_status_error
from media_crawler.scrub import scrub_text

PLATFORM = "facebook"

RATE_LIMITED_CODES = frozenset({4, 17, 32, 613, *range(80001, 80015)})
AUTH_CODES = frozenset({190, 102})
TRANSIENT_CODES = frozenset({1, 2})
POLICY_BLOCK_CODE = 368
DELETED_SUBCODE = 33


def is_error_body(body: Any) -> bool:
    return isinstance(body, dict) and isinstance(body.get("error"), dict)


def classify_error(
    body: Any, http_status: int | None = None, retry_after: float | None = None, secrets: Iterable[str] = ()
) -> CrawlError:
    """The CrawlError a Graph `{error: {...}}` body stands for."""
    error = body["error"]
    code = as_int(error.get("code"))
    subcode = as_int(error.get("error_subcode"))
    platform_code = f"{code}/{subcode}" if subcode else str(code)
    message = scrub_text(f"({error.get('type') or 'error'} #{platform_code}) {as_str(error.get('message')) or ''}", secrets)
    error_class = _error_class(code, subcode, bool(error.get("is_transient")))
    return CrawlError(error_class, message, platform_code=platform_code, http_status=http_status, retry_after=retry_after)


def _error_class(code: int | None, subcode: int | None, is_transient: bool) -> ErrorClass:
    if code in RATE_LIMITED_CODES or is_transient:
        return ErrorClass.RATE_LIMITED
    if code in AUTH_CODES:
        return ErrorClass.AUTH
    if code == 10 or (code is not None and 200 <= code <= 299):
        return ErrorClass.NOT_FOUND  # permission: permanent for this object
    if code in (100, POLICY_BLOCK_CODE):
        return ErrorClass.NOT_FOUND  # subcode 33: deleted/private; otherwise an invalid request
    if code in TRANSIENT_CODES:
        return ErrorClass.HTTP_5XX
    return ErrorClass.PARSE_ERROR  # a code we do not know: a person must look


def decode_response(response: ApiResponse, secrets: Iterable[str] = ()) -> Any:
    """The decoded body of a successful answer; every failure raised.

    Graph errors come with 400/403/500 alike, so the body's code decides
    first and the HTTP status only when the body has no error object.
    """
    retry_after = parse_retry_after(header(response.headers, "Retry-After"))
    try:
        body = decode_json(PLATFORM, response, secrets)
    except CrawlError:
        status_error = http_status_error(PLATFORM, response)
        if status_error is not None:
            raise status_error from None
        raise
    if is_error_body(body):
        raise classify_error(body, response.status, retry_after, secrets)
    status_error = http_status_error(PLATFORM, response)
    if status_error is not None:
        raise status_error
    if response.status >= 400:
        raise CrawlError(ErrorClass.AUTH if response.status == 403 else ErrorClass.PARSE_ERROR,
                         f"HTTP {response.status} from {response.url} without an error object", http_status=response.status)
    return body

"""Graph API error bodies and HTTP answers → CrawlError.

`{error: {message, type, code, error_subcode, fbtrace_id, is_transient}}`:
- 4, 17, 32, 613, 80001-80014 (and any `is_transient: true`): throttled → rate_limited
- 368: *temporarily* blocked for policy violations → rate_limited: wait, retry,
  back off long (docs/PLATFORMS.md), never a tombstone
- 190 (and 102, 463, 467 subcodes): the token is expired or invalid → auth
- 100 whose message names a permission, a feature or the kind of token it
  requires ("Pages Public Content Access requires either app secret proof or
  an app token"): a credential problem, the object is not gone → auth
- 10, 200-299: a missing permission of the token or app (fix the credential;
  the object is not gone, docs/PLATFORMS.md) → auth
- 100/33: deleted or private (a tombstone); other 100s: an invalid request → not_found
- 1, 2: "unknown error" / "service unavailable" → http_5xx (transient)
"""
from __future__ import annotations

import re
from typing import Any, Iterable

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.http import parse_retry_after
from media_crawler.platforms.base import ApiResponse
from media_crawler.platforms.fields import as_int, as_str
from media_crawler.platforms.responses import decode_json, header, http_status_error
from media_crawler.scrub import excerpt, scrub_text

PLATFORM = "facebook"

RATE_LIMITED_CODES = frozenset({4, 17, 32, 613, *range(80001, 80015)})
AUTH_CODES = frozenset({190, 102})
TRANSIENT_CODES = frozenset({1, 2})
POLICY_BLOCK_CODE = 368
INVALID_PARAMETER_CODE = 100
DELETED_SUBCODE = 33
# A 100 that says which credential the call lacks: "Pages Public Content Access requires
# either app secret proof or an app token", "This endpoint requires the
# 'pages_read_engagement' permission or the 'Page Public Content Access' feature".
_CREDENTIAL_MESSAGE = re.compile(
    r"(?i)(public content access|public metadata access|app secret proof|app(?:lication)? token|access token"
    r"|requires?\b[^.]{0,200}\b(?:permissions?|features?))"
)
PLATFORM_CODE_LIMIT = 32  # the ledger's error_code / platform_code column


def is_error_body(body: Any) -> bool:
    return isinstance(body, dict) and isinstance(body.get("error"), dict)


def classify_answer(body: Any) -> CrawlError | None:
    """The CrawlError a decoded Graph answer stands for (None: not an error body)."""
    return classify_error(body) if is_error_body(body) else None


def classify_error(
    body: Any, http_status: int | None = None, retry_after: float | None = None, secrets: Iterable[str] = ()
) -> CrawlError:
    """The CrawlError a Graph `{error: {...}}` body stands for."""
    error = body["error"]
    code = as_int(error.get("code"))
    subcode = as_int(error.get("error_subcode"))
    platform_code = excerpt(f"{code}/{subcode}" if subcode else str(code), PLATFORM_CODE_LIMIT)
    text = as_str(error.get("message")) or ""
    message = scrub_text(f"({as_str(error.get('type')) or 'error'} #{platform_code}) {text}", secrets)
    error_class = _error_class(code, subcode, error.get("is_transient") is True, text)
    return CrawlError(error_class, message, platform_code=platform_code, http_status=http_status, retry_after=retry_after)


def _error_class(code: int | None, subcode: int | None, is_transient: bool, message: str = "") -> ErrorClass:
    if code in RATE_LIMITED_CODES or is_transient:
        return ErrorClass.RATE_LIMITED
    if code == POLICY_BLOCK_CODE:
        return ErrorClass.RATE_LIMITED  # a temporary block: wait and retry, never mark the page gone
    if code in AUTH_CODES:
        return ErrorClass.AUTH
    if code == INVALID_PARAMETER_CODE and subcode != DELETED_SUBCODE and _CREDENTIAL_MESSAGE.search(message):
        return ErrorClass.AUTH  # the token or app lacks a permission or feature: fix the credential
    if code == 10 or (code is not None and 200 <= code <= 299):
        return ErrorClass.AUTH  # the token or app lacks a permission: the object is not gone
    if code == INVALID_PARAMETER_CODE:
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

"""Bilibili's `{code, message, ttl, data}` envelope and HTTP answers → CrawlError.

`code != 0` is an error even with HTTP 200. Risk control (-412/-352/-799/-401)
means "back off long and lower the rate"; deleted, invisible, region-locked
and paid-only items are permanent for that item.
"""
from __future__ import annotations

from typing import Any

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.platforms.base import ApiResponse
from media_crawler.platforms.fields import as_int, as_str
from media_crawler.platforms.responses import decode_json, http_status_error, parse_error
from media_crawler.scrub import excerpt

PLATFORM = "bilibili"

RATE_LIMITED_CODES = frozenset({-412, -352, -799, -401})
NOT_FOUND_CODES = frozenset({-404, 62002, 62004, 62012, -403, -10403, -688, 87007, 87008})
AUTH_CODES = frozenset({-101})
# On a WBI-signed endpoint, -403 means the signature was rejected (stale keys),
# not that the item is forbidden: refresh the keys and try once more.
BAD_SIGNATURE_CODE = -403


def classify_envelope(body: Any, endpoint: str = "") -> CrawlError | None:
    """None when `body` is a successful envelope, else the error it carries."""
    if not isinstance(body, dict) or "code" not in body:
        return parse_error(PLATFORM, f"{endpoint or 'response'} is not a {{code, data}} envelope", body)
    code = envelope_code(body["code"])
    if code is None:
        what = f"{endpoint or 'response'} has a code that is not a 64-bit integer: {excerpt(repr(body['code']), 80)}"
        return parse_error(PLATFORM, what, body)
    if code == 0:
        return None
    message = f"{endpoint or 'request'}: code {code} {as_str(body.get('message')) or ''}".strip()
    if code in RATE_LIMITED_CODES:
        return CrawlError(ErrorClass.RATE_LIMITED, message, platform_code=code)
    if code in NOT_FOUND_CODES:
        return CrawlError(ErrorClass.NOT_FOUND, message, platform_code=code)
    if code in AUTH_CODES:
        return CrawlError(ErrorClass.AUTH, message, platform_code=code)
    # An unknown non-zero code: a contract we do not understand, keep the body.
    return parse_error(PLATFORM, f"unknown {message}", body)


def envelope_code(value: Any) -> int | None:
    """The envelope's integer `code` (a number or a numeric string), else None."""
    if isinstance(value, float) and not value.is_integer():
        return None
    if isinstance(value, str) and not value.strip().lstrip("+-").isdigit():
        return None
    return as_int(value)


def data_or_raise(body: Any, endpoint: str = "") -> Any:
    error = classify_envelope(body, endpoint)
    if error is not None:
        raise error
    return body.get("data")


def decode_response(response: ApiResponse, endpoint: str) -> Any:
    """The decoded body of an API answer; HTTP-level failures raised.

    Bilibili's edge answers risk control as an HTTP 412 HTML page, not JSON.
    """
    if response.status == 412:
        raise CrawlError(
            ErrorClass.RATE_LIMITED, f"{endpoint}: HTTP 412 request blocked", platform_code=-412, http_status=412
        )
    error = http_status_error(PLATFORM, response)
    if error is not None:
        raise error
    return decode_json(PLATFORM, response)


def is_bad_signature(error: CrawlError) -> bool:
    return error.platform_code == str(BAD_SIGNATURE_CODE)

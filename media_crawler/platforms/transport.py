"""The requests-based ApiTransport: one GET, timeouts, network errors
classified, URLs scrubbed, and two hooks for the shared rate budget."""
from __future__ import annotations

from typing import Any, Callable, Mapping

import requests

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.http import make_session
from media_crawler.platforms.base import ApiResponse
from media_crawler.platforms.responses import header
from media_crawler.platforms.scrub import scrub_text, scrub_url, secret_values

BeforeRequest = Callable[[str], None]
AfterResponse = Callable[[str, ApiResponse], None]


class RequestsTransport:
    """`before_request(platform)` runs before every call (the rate budget
    blocks there); `after_response(platform, response)` sees every answer,
    headers included, so Facebook's usage headers can slow the budget down.

    HTTP error statuses are returned, not raised: platforms hide errors in
    200 bodies and in 4xx bodies alike, and only the adapter can tell them apart.
    """

    def __init__(
        self,
        session: requests.Session | None = None,
        connect_timeout: float = 5,
        read_timeout: float = 30,
        before_request: BeforeRequest | None = None,
        after_response: AfterResponse | None = None,
    ) -> None:
        self.session = session or make_session()
        self.timeout = (connect_timeout, read_timeout)
        self.before_request = before_request
        self.after_response = after_response

    def get(
        self, platform: str, url: str, *, params: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None
    ) -> ApiResponse:
        if self.before_request is not None:
            self.before_request(platform)
        secrets = secret_values(dict(params or {})) + _cookie_values(headers)
        try:
            raw = self.session.get(url, params=params, headers=dict(headers or {}), timeout=self.timeout)
            body = raw.content
        except requests.Timeout as exc:  # before ConnectionError: ConnectTimeout is both
            raise _network_error(ErrorClass.NETWORK_TIMEOUT, platform, url, exc, secrets) from None
        except requests.RequestException as exc:
            raise _network_error(ErrorClass.CONNECTION_RESET, platform, url, exc, secrets) from None
        response = ApiResponse(
            status=raw.status_code,
            headers=raw.headers,
            text=body.decode(_charset(raw), errors="replace"),
            url=scrub_url(raw.url or url),
        )
        if self.after_response is not None:
            self.after_response(platform, response)
        return response


def _charset(raw: requests.Response) -> str:
    """The declared charset, else UTF-8. requests would guess (slowly, and
    often wrongly for Chinese JSON) when a JSON API omits the charset."""
    content_type = header(raw.headers, "Content-Type") or ""
    if "charset=" in content_type.lower() and raw.encoding:
        return raw.encoding
    return "utf-8"


def _cookie_values(headers: Mapping[str, str] | None) -> list[str]:
    cookie = header(headers, "Cookie") or ""
    return [part.split("=", 1)[1] for part in cookie.split(";") if "=" in part]


def _network_error(
    error_class: ErrorClass, platform: str, url: str, exc: Exception, secrets: list[str]
) -> CrawlError:
    # requests puts the full URL (token included) into its exception text.
    detail = scrub_text(f"{type(exc).__name__}: {exc}", secrets)
    return CrawlError(error_class, f"{platform} GET {scrub_url(url)}: {detail}")

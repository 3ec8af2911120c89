"""The requests-based ApiTransport: one GET, timeouts, network errors
classified, URLs scrubbed, two hooks for the shared rate budget, and one that
sees each answer as fetched (pipeline/answers.py keeps it for the archive)."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping
from urllib.parse import urlencode

import requests
import urllib3

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.sessions import make_session
from media_crawler.net.connect_errors import dropped_connection_class
from media_crawler.net.policy import UrlPolicy
from media_crawler.net.proxies import PerOrigin, proxy_for
from media_crawler.net.redirects import get_following_redirects
from media_crawler.platforms.base import ApiResponse
from media_crawler.platforms.responses import header
from media_crawler.scrub import scrub_text, scrub_url, secret_values



@dataclass(frozen=True)
class FetchedAnswer:
    """One API answer as it came: what the `keep_answer` hook is handed. Only the URL is
    scrubbed; the headers and body are the platform's (the keeper scrubs what it keeps)."""
    platform: str
    url: str  # the answering URL (after redirects), scrubbed
    status: int
    reason: str
    headers: tuple[tuple[str, str], ...]  # as received, repeated names kept (Set-Cookie)
    body: bytes  # with its Content-Encoding undone (requests decodes gzip/deflate)
    fetched_at: float
    secrets: tuple[str, ...]  # the request's own secret values (secret-named params, cookies)


BeforeRequest = Callable[[str], None]
AfterResponse = Callable[[str, ApiResponse], None]
KeepAnswer = Callable[[FetchedAnswer], None]
PolicyFor = Callable[[str], UrlPolicy]
PUBLIC_ONLY = UrlPolicy.from_entries(["*"])
MAX_REDIRECTS = 5
# An API page or a URL feed page is JSON of kilobytes; decompressed, it is refused past this.
MAX_API_BODY_BYTES = 32 * 1024**2


class RequestsTransport:
    """`before_request(platform)` runs before every call (the rate budget
    blocks there); `after_response(platform, response)` sees every answer,
    headers included, so Facebook's usage headers can slow the budget down.
    `policy_for(platform)` is the URL policy each call and each of its
    redirect hops must pass (pipeline/runtime.py `api_policy`).

    HTTP error statuses are returned, not raised: platforms hide errors in
    200 bodies and in 4xx bodies alike, and only the adapter can tell them apart.
    """

    def __init__(
        self,
        session: requests.Session | None = None,
        policy_for: PolicyFor | None = None,
        connect_timeout: float = 5,
        read_timeout: float = 30,
        before_request: BeforeRequest | None = None,
        after_response: AfterResponse | None = None,
        keep_answer: KeepAnswer | None = None,
    ) -> None:
        self.session = session or make_session()
        self.policy_for = policy_for or (lambda _platform: PUBLIC_ONLY)
        self.timeout = (connect_timeout, read_timeout)
        self.before_request = before_request
        self.after_response = after_response
        self.keep_answer = keep_answer
        # requests' reading of the environment (proxies, NO_PROXY, CA bundle) for a URL, once per origin.
        self._environment_settings = PerOrigin(
            lambda url: self.session.merge_environment_settings(url, {}, True, None, None))

    def get(
        self, platform: str, url: str, *, params: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None
    ) -> ApiResponse:
        if self.before_request is not None:
            self.before_request(platform)
        secrets = secret_values(dict(params or {})) + _cookie_values(headers)
        policy = self.policy_for(platform)
        try:
            # The policy's own parse of the URL, the params joined to it by us: requests
            # would first re-read the URL its own way (`http://a\\@b/` is host `a` to it).
            full_url = _with_params(policy.check(url).url, params)
        except CrawlError as error:
            raise CrawlError(error.error_class, f"{platform} GET {scrub_url(url)}: {error.message}") from None
        try:
            raw, target = get_following_redirects(
                policy, full_url, dict(headers or {}), self._send, max_redirects=MAX_REDIRECTS,
                proxy_for=self._proxy_for)
            with raw:
                body = _read_bounded(raw, platform, target.url)
        except CrawlError as error:
            raise CrawlError(error.error_class, f"{platform} GET {scrub_url(url)}: {scrub_text(error.message, secrets)}",
                             http_status=error.http_status) from None
        except requests.Timeout as exc:  # before ConnectionError: ConnectTimeout is both
            raise _network_error(ErrorClass.NETWORK_TIMEOUT, platform, url, exc, secrets) from None
        except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
            raise _network_error(dropped_connection_class(exc), platform, url, exc, secrets) from None
        response = ApiResponse(
            status=raw.status_code,
            headers=raw.headers,
            text=body.decode(_charset(raw), errors="replace"),
            url=scrub_url(target.url),
        )
        if self.after_response is not None:
            self.after_response(platform, response)
        if self.keep_answer is not None:
            self.keep_answer(FetchedAnswer(
                platform=platform, url=response.url, status=raw.status_code, reason=raw.reason or "",
                headers=_header_pairs(raw), body=body, fetched_at=time.time(), secrets=tuple(secrets)))
        return response

    def _send(self, target, headers: Mapping[str, str]) -> requests.Response:
        """One GET through the session's adapter. Not `Session.send`: even with
        allow_redirects=False it parses the Location to prepare the next request,
        with its own URL parser (a hostile Location raised ValueError there);
        redirects are net/redirects.py's to judge."""
        request = self.session.prepare_request(requests.Request("GET", target.url, headers=dict(headers)))
        settings = self._environment_settings(target.url)
        adapter = self.session.get_adapter(request.url)
        response = adapter.send(request, timeout=self.timeout, **settings)
        # What Session.send would do: the answer's cookies (parsed by requests
        # into response.cookies) join the session's jar for the next API call.
        self.session.cookies.update(response.cookies)
        return response

    def _proxy_for(self, target_url: str) -> str | None:
        return proxy_for(target_url, self._environment_settings(target_url).get("proxies"))


def _with_params(url: str, params: Mapping[str, Any] | None) -> str:
    """`url` with `params` appended as requests would encode them (None values left out)."""
    pairs = [(key, value) for key, value in (params or {}).items() if value is not None]
    if not pairs:
        return url
    return f"{url}{'&' if '?' in url else '?'}{urlencode(pairs, doseq=True)}"


def _read_bounded(raw: requests.Response, platform: str, url: str) -> bytes:
    """The body, refused past MAX_API_BODY_BYTES (an API page is JSON of some kilobytes;
    a feed that answers gigabytes must not take the worker's memory)."""
    declared = raw.headers.get("Content-Length")
    if declared and declared.strip().isdigit() and int(declared) > MAX_API_BODY_BYTES:
        raise CrawlError(ErrorClass.TOO_LARGE, f"answer declares {declared} bytes, over {MAX_API_BODY_BYTES}")
    chunks, size = [], 0
    for chunk in raw.iter_content(64 * 1024):
        size += len(chunk)
        if size > MAX_API_BODY_BYTES:
            raise CrawlError(ErrorClass.TOO_LARGE, f"answer runs past {MAX_API_BODY_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _charset(raw: requests.Response) -> str:
    """The declared charset, else UTF-8. requests would guess (slowly, and
    often wrongly for Chinese JSON) when a JSON API omits the charset."""
    content_type = header(raw.headers, "Content-Type") or ""
    if "charset=" in content_type.lower() and raw.encoding:
        return raw.encoding
    return "utf-8"


def _header_pairs(raw: requests.Response) -> tuple[tuple[str, str], ...]:
    """Every header line of the answer in order, a repeated name (Set-Cookie) kept
    repeated: urllib3's headers, where requests' dict would join them with commas."""
    received = getattr(raw.raw, "headers", None)
    items = received.items() if received is not None else raw.headers.items()
    return tuple((str(name), str(value)) for name, value in items)


def _cookie_values(headers: Mapping[str, str] | None) -> list[str]:
    cookie = header(headers, "Cookie") or ""
    return [part.split("=", 1)[1] for part in cookie.split(";") if "=" in part]


def _network_error(
    error_class: ErrorClass, platform: str, url: str, exc: Exception, secrets: list[str]
) -> CrawlError:
    # requests puts the full URL (token included) into its exception text.
    detail = scrub_text(f"{type(exc).__name__}: {exc}", secrets)
    return CrawlError(error_class, f"{platform} GET {scrub_url(url)}: {detail}")

"""One API GET under the URL policy, whatever HTTP library carries it.

What every ApiTransport (platforms/base.py) does around its one exchange: the rate
budget's hook first, the URL checked by the policy (and each redirect hop, by
net/redirects.py), the body read bounded, its charset as declared, network
failures classified and scrubbed, the answer handed to the response hook and to
the answer keeper (pipeline/answers.py). Two carry it: platforms/transport.py
(requests: its cookie jar and netrc, for the platforms' APIs) and
platforms/plain_transport.py (urllib3, the media path's pinned pools, for a
platform whose spec says `plain_api`: a URL list's feed). Nothing here imports
requests or urllib3.
"""
from __future__ import annotations

import codecs
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping
from urllib.parse import urlencode

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.net.policy import UrlPolicy
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
    body: bytes  # with its Content-Encoding undone (gzip/deflate)
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
CHUNK = 64 * 1024


class PolicedGet:
    """`get` of the ApiTransport protocol around a subclass's one exchange.

    `before_request(platform)` runs before every call (the rate budget blocks
    there); `after_response(platform, response)` sees every answer, headers
    included, so Facebook's usage headers can slow the budget down;
    `policy_for(platform)` is the URL policy each call and each of its redirect
    hops must pass (pipeline/runtime.py `api_policy`).

    HTTP error statuses are returned, not raised: platforms hide errors in
    200 bodies and in 4xx bodies alike, and only the adapter can tell them apart.

    A subclass gives: `_send(target, headers)`, one GET of target.url, redirects not
    followed, an answer with `status_code`, `headers`, `reason` and `close()`;
    `_proxy_for(url)`; `_chunks(answer)`, the body with its Content-Encoding undone;
    `_header_pairs(answer)`; `_failure_class(exc)`, the error class of its library's
    network failure (None: not one).
    """

    def __init__(self, policy_for: PolicyFor | None = None, before_request: BeforeRequest | None = None,
                 after_response: AfterResponse | None = None, keep_answer: KeepAnswer | None = None) -> None:
        self.policy_for = policy_for or (lambda _platform: PUBLIC_ONLY)
        self.before_request = before_request
        self.after_response = after_response
        self.keep_answer = keep_answer

    def get(
        self, platform: str, url: str, *, params: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None
    ) -> ApiResponse:
        if self.before_request is not None:
            self.before_request(platform)
        secrets = secret_values(dict(params or {})) + cookie_values(headers)
        policy = self.policy_for(platform)
        try:
            # The policy's own parse of the URL, the params joined to it by us: an HTTP
            # library would first re-read the URL its own way (`http://a\\@b/` is host `a` to requests).
            full_url = with_params(policy.check(url).url, params)
        except CrawlError as error:
            raise CrawlError(error.error_class, f"{platform} GET {scrub_url(url)}: {error.message}") from None
        try:
            raw, target = get_following_redirects(
                policy, full_url, dict(headers or {}), self._send, max_redirects=MAX_REDIRECTS,
                proxy_for=self._proxy_for)
            with raw:
                body = read_bounded(self._chunks(raw), header(raw.headers, "Content-Length"))
        except CrawlError as error:
            raise CrawlError(error.error_class, f"{platform} GET {scrub_url(url)}: {scrub_text(error.message, secrets)}",
                             http_status=error.http_status) from None
        except Exception as exc:  # noqa: BLE001 - classified below, anything else raised as it is
            error_class = self._failure_class(exc)
            if error_class is None:
                raise
            # The library's exception text may quote the full URL, token included.
            detail = scrub_text(f"{type(exc).__name__}: {exc}", secrets)
            raise CrawlError(error_class, f"{platform} GET {scrub_url(url)}: {detail}") from None
        response = ApiResponse(
            status=raw.status_code,
            headers=raw.headers,
            text=decoded_text(body, raw.headers),
            url=scrub_url(target.url),
        )
        if self.after_response is not None:
            self.after_response(platform, response)
        if self.keep_answer is not None:
            self.keep_answer(FetchedAnswer(
                platform=platform, url=response.url, status=raw.status_code, reason=raw.reason or "",
                headers=self._header_pairs(raw), body=body, fetched_at=time.time(), secrets=tuple(secrets)))
        return response

    # -- what a subclass gives -------------------------------------------------------------
    def _send(self, target, headers: Mapping[str, str]):
        raise NotImplementedError

    def _proxy_for(self, target_url: str) -> str | None:
        raise NotImplementedError

    def _chunks(self, raw) -> Iterable[bytes]:
        raise NotImplementedError

    def _header_pairs(self, raw) -> tuple[tuple[str, str], ...]:
        raise NotImplementedError

    def _failure_class(self, exc: Exception) -> ErrorClass | None:
        raise NotImplementedError


def with_params(url: str, params: Mapping[str, Any] | None) -> str:
    """`url` with `params` appended as requests would encode them (None values left out)."""
    pairs = [(key, value) for key, value in (params or {}).items() if value is not None]
    if not pairs:
        return url
    return f"{url}{'&' if '?' in url else '?'}{urlencode(pairs, doseq=True)}"


def read_bounded(chunks: Iterable[bytes], declared: str | None) -> bytes:
    """The body, refused past MAX_API_BODY_BYTES (an API page is JSON of some kilobytes;
    a feed that answers gigabytes must not take the worker's memory)."""
    length = (declared or "").strip()
    # ASCII digits only: "²" is a digit to str.isdigit() but no number to int() (http.client
    # and urllib3 ignore such a length, and so does this bound: the chunks are counted anyway).
    if length.isascii() and length.isdigit() and int(length) > MAX_API_BODY_BYTES:
        raise CrawlError(ErrorClass.TOO_LARGE, f"answer declares {length} bytes, over {MAX_API_BODY_BYTES}")
    pieces, size = [], 0
    for chunk in chunks:
        size += len(chunk)
        if size > MAX_API_BODY_BYTES:
            raise CrawlError(ErrorClass.TOO_LARGE, f"answer runs past {MAX_API_BODY_BYTES} bytes")
        pieces.append(chunk)
    return b"".join(pieces)


def declared_charset(headers: Mapping[str, str]) -> str:
    """The Content-Type's charset, else UTF-8 (an HTTP library would guess, slowly,
    and often wrongly for Chinese JSON, when a JSON API omits it); a charset
    Python does not know is read as UTF-8 too (undecodable bytes replaced)."""
    for parameter in (header(headers, "Content-Type") or "").split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip().strip("'\"")
            try:
                return codecs.lookup(charset).name if charset else "utf-8"
            except LookupError:
                return "utf-8"
    return "utf-8"


def decoded_text(body: bytes, headers: Mapping[str, str]) -> str:
    """The body as text in its declared charset (`declared_charset`), else as UTF-8: a
    codec Python knows may be no text encoding (base64, zlib, hex: LookupError) or fail
    even with errors replaced (idna, undefined; punycode on non-ASCII bytes: UnicodeError),
    and a server's Content-Type must not end the walk with a traceback."""
    try:
        return body.decode(declared_charset(headers), errors="replace")
    except (LookupError, UnicodeError):
        return body.decode("utf-8", errors="replace")


def cookie_values(headers: Mapping[str, str] | None) -> list[str]:
    cookie = header(headers, "Cookie") or ""
    return [part.split("=", 1)[1] for part in cookie.split(";") if "=" in part]

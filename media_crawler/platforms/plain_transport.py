"""The ApiTransport of a platform whose API is plain GETs of public documents
(`PlatformSpec.plain_api`: a URL list's feed pages), over the media path's
transport (download/media_transport.py: urllib3, pinned pools, the
environment's proxies, the CA bundle, no urllib3 retries).

Not requests: a URL feed needs nothing it adds (no cookie jar between calls, no
netrc credentials; the media path sends neither either), and importing it,
with the character-set guessers it loads, was a third of `fetch-urls`' start-up
before its first request (issue 31). The GET around the exchange (policy,
redirect hops, bounded body, hooks) is platforms/api_get.py's, as for
requests; failures are classified as the media path classifies urllib3's
(download/responses.py): connect timeouts and read timeouts network_timeout,
a refusal connection_refused, anything else that broke the exchange
connection_reset.
"""
from __future__ import annotations

from typing import Iterator, Mapping

import urllib3
from urllib3.util import make_headers

from media_crawler.download.media_transport import MediaTransport
from media_crawler.errors import ErrorClass
from media_crawler.http import Timeouts
from media_crawler.net.connect_errors import dropped_connection_class
from media_crawler.platforms.api_get import CHUNK, AfterResponse, BeforeRequest, KeepAnswer, PolicedGet, PolicyFor

# What requests sends: the encodings urllib3 can undo here (gzip and deflate, brotli or
# zstd when their modules are installed). A feed of thousands of URLs shrinks tenfold.
ACCEPT_ENCODING = make_headers(accept_encoding=True)


class PlainAnswer:
    """urllib3's response under the names platforms/api_get.py and net/redirects.py read."""

    __slots__ = ("raw", "status_code", "headers", "reason")

    def __init__(self, raw: urllib3.BaseHTTPResponse) -> None:
        self.raw, self.status_code, self.headers, self.reason = raw, raw.status, raw.headers, raw.reason

    def close(self) -> None:
        """A body read to its end already gave its connection back (urllib3 does); one
        left unread (a redirect's, a refused one) closes it: it cannot be reused."""
        self.raw.close()
        self.raw.release_conn()

    def __enter__(self) -> "PlainAnswer":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()


class PlainTransport(PolicedGet):
    """platforms/api_get.py's GET over a MediaTransport (a runtime's `session.media`)."""

    def __init__(self, media: MediaTransport, policy_for: PolicyFor | None = None, connect_timeout: float = 5,
                 read_timeout: float = 30, before_request: BeforeRequest | None = None,
                 after_response: AfterResponse | None = None, keep_answer: KeepAnswer | None = None) -> None:
        super().__init__(policy_for, before_request, after_response, keep_answer)
        self.media = media
        self.timeouts = Timeouts(connect=connect_timeout, read=read_timeout)

    def _send(self, target, headers: Mapping[str, str]) -> PlainAnswer:
        # No `target=`: urllib3's own exchange (not the media path's kept-alive one), so
        # the answer's headers come whole and its body can be decoded.
        if not any(name.lower() == "accept-encoding" for name in headers):
            headers = {**ACCEPT_ENCODING, **headers}
        raw = self.media.request("GET", target.url, headers, timeouts=self.timeouts)
        return PlainAnswer(raw)

    def _proxy_for(self, target_url: str) -> str | None:
        return self.media.proxy_for(target_url)

    def _chunks(self, raw: PlainAnswer) -> Iterator[bytes]:
        return raw.raw.stream(CHUNK, decode_content=True)

    def _header_pairs(self, raw: PlainAnswer) -> tuple[tuple[str, str], ...]:
        """Every header line in order, a repeated name (Set-Cookie) kept repeated."""
        return tuple((str(name), str(value)) for name, value in raw.headers.items())

    def _failure_class(self, exc: Exception) -> ErrorClass | None:
        if isinstance(exc, urllib3.exceptions.MaxRetryError):  # a connect failure: only its timeout is a timeout
            reason = exc.reason
            if isinstance(reason, urllib3.exceptions.ConnectTimeoutError) and not isinstance(
                    reason, urllib3.exceptions.NewConnectionError):
                return ErrorClass.NETWORK_TIMEOUT
            return dropped_connection_class(exc)
        if isinstance(exc, urllib3.exceptions.TimeoutError):  # waiting for the headers or the body
            return ErrorClass.NETWORK_TIMEOUT
        if isinstance(exc, (urllib3.exceptions.HTTPError, OSError)):
            return dropped_connection_class(exc)
        return None

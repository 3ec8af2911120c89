"""Getting a response for a media URL: safe redirects, statuses as error classes, range headers.

The exchange itself goes through download/media_transport.py (urllib3, pinned
connections). Redirects are followed by net/redirects.py, hop by hop, because
every hop must pass the same URL policy as the first URL: a CDN on an allowed
host must not be able to bounce the crawler to 169.254.169.254 or localhost.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

import urllib3

from media_crawler.download.media_transport import CarriesMedia, MediaTransport, media_transport_of
from media_crawler.errors import CrawlError, ErrorClass, status_error
from media_crawler.http import Timeouts, parse_retry_after, redact_url
from media_crawler.net.connect_errors import dropped_connection_class
from media_crawler.net.pinning import check_proxied_target
from media_crawler.net.policy import AddressRefused, UrlPolicy
from media_crawler.net.redirects import get_following_redirects
from media_crawler.net.targets import Target

_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(?:(\d+)-(\d+)|\*)\s*/\s*(\d+|\*)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class ContentRange:
    start: int | None  # None for "bytes */total" (a 416 answer)
    end: int | None
    total: int | None  # None for "/*": length unknown


def open_following_redirects(
    session: MediaTransport | CarriesMedia,
    url: str,
    headers: Mapping[str, str],
    *,
    timeouts: Timeouts,
    url_policy: UrlPolicy,
    max_redirects: int,
) -> MediaResponse:
    """GET `url` with a streamed body, following at most `max_redirects` hops, each checked by `url_policy`.

    `session`: a runtime's session (its media transport is used) or a MediaTransport.
    """
    transport = media_transport_of(session)

    def send(target, hop_headers):
        # Each hop's proxy is looked up once, here, for both of its uses: the check of a
        # proxied target (what get_following_redirects' proxy_for would do, at the same
        # point: before sending, its AddressRefused a disallowed_url) and the transport.
        proxy = transport.proxy_for(target.url)
        check_proxied_target(url_policy, target, proxy)
        return _get(transport, target, hop_headers, timeouts, proxy)

    response, _target = get_following_redirects(url_policy, url, headers, send, max_redirects=max_redirects)
    return response


class MediaResponse:
    """urllib3's response under the names the downloader and net/redirects.py read."""

    __slots__ = ("raw", "status_code", "headers", "url")

    def __init__(self, raw: urllib3.BaseHTTPResponse, url: str) -> None:
        self.raw, self.status_code, self.headers, self.url = raw, raw.status, raw.headers, url

    def close(self) -> None:
        """Drop the connection: a body not read to its end cannot be reused (fetcher.py
        hands a fully read one back with `raw.release_conn()` first)."""
        self.raw.close()
        self.raw.release_conn()

    def __enter__(self) -> "MediaResponse":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()


def _get(transport: MediaTransport, target: Target, headers: Mapping[str, str], timeouts: Timeouts,
         proxy: str | None) -> MediaResponse:
    """One GET, redirects not followed, with urllib3's failures turned into error classes.

    Messages name the exception type, never str(exc): urllib3 puts the full
    URL, query string and signature included, into its exception text.
    The URL sent is the Target's: ASCII, normalized once by net/targets.py.
    """
    url = target.url
    try:
        raw = transport.request("GET", url, headers, timeouts=timeouts, target=target, proxy=proxy)
    except urllib3.exceptions.LocationValueError:
        raise CrawlError(ErrorClass.DISALLOWED_URL, f"unusable URL {redact_url(url)}") from None
    except AddressRefused as exc:
        raise CrawlError(ErrorClass.DISALLOWED_URL, str(exc)) from None
    except urllib3.exceptions.MaxRetryError as exc:  # as requests read it: only a connect timeout is a timeout
        reason = exc.reason
        timed_out = isinstance(reason, urllib3.exceptions.ConnectTimeoutError) and not isinstance(
            reason, urllib3.exceptions.NewConnectionError)
        error_class = ErrorClass.NETWORK_TIMEOUT if timed_out else dropped_connection_class(exc)
        raise CrawlError(error_class, f"{type(reason).__name__} from {redact_url(url)}") from None
    except urllib3.exceptions.ReadTimeoutError:
        raise CrawlError(ErrorClass.NETWORK_TIMEOUT, f"ReadTimeoutError from {redact_url(url)}") from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise CrawlError(dropped_connection_class(exc), f"{type(exc).__name__} from {redact_url(url)}") from None
    return MediaResponse(raw, url)


def raise_for_status(response: MediaResponse, safe_url: str) -> None:
    """Map an HTTP status that carries no usable body onto the error taxonomy (errors.py's table)."""
    status = response.status_code
    if status in (200, 206):
        return
    retry_after = parse_retry_after(response.headers.get("Retry-After"))
    error = status_error(status, f"HTTP {status} from {safe_url}", api=False, retry_after=retry_after)
    if error is not None:
        raise error


def parse_content_range(value: str | None) -> ContentRange | None:
    """`bytes 100-199/1000`, `bytes 100-199/*` or `bytes */1000`; None when absent or malformed."""
    match = _CONTENT_RANGE.match(value or "")
    if not match:
        return None
    start, end, total = match.groups()
    return ContentRange(
        None if start is None else int(start),
        None if end is None else int(end),
        None if total == "*" else int(total),
    )


def parse_content_length(value: str | None) -> int | None:
    try:
        length = int(value) if value is not None else None
    except ValueError:
        return None
    return length if length is not None and length >= 0 else None


def resume_validator(etag: str | None, last_modified: str | None) -> str | None:
    """The value to send as If-Range later: a strong ETag, else Last-Modified.

    RFC 9110 forbids weak ETags (W/"...") in If-Range, and a server receiving
    one must ignore the Range, so a weak ETag is no validator at all.
    """
    if etag and not etag.strip().startswith("W/"):
        return etag.strip()
    return last_modified.strip() if last_modified else None

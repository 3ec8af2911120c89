"""Getting a response for a media URL: safe redirects, statuses as error classes, range headers.

Redirects are followed by net/redirects.py, not by requests, because every hop
must pass the same URL policy as the first URL: a CDN on an allowed host must
not be able to bounce the crawler to 169.254.169.254 or localhost.
"""
from __future__ import annotations

import re
import weakref
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import urlsplit

import requests
import urllib3
from requests.cookies import RequestsCookieJar, extract_cookies_to_jar
from requests.sessions import merge_setting
from requests.structures import CaseInsensitiveDict
from requests.utils import get_netrc_auth

from media_crawler.errors import CrawlError, ErrorClass, status_error
from media_crawler.http import Timeouts, parse_retry_after, redact_url
from media_crawler.net.policy import AddressRefused, UrlPolicy
from media_crawler.net.redirects import get_following_redirects

_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(?:(\d+)-(\d+)|\*)\s*/\s*(\d+|\*)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class ContentRange:
    start: int | None  # None for "bytes */total" (a 416 answer)
    end: int | None
    total: int | None  # None for "/*": length unknown


def open_following_redirects(
    session: requests.Session,
    url: str,
    headers: Mapping[str, str],
    *,
    timeouts: Timeouts,
    url_policy: UrlPolicy,
    max_redirects: int,
) -> requests.Response:
    """GET `url` with a streamed body, following at most `max_redirects` hops, each checked by `url_policy`."""
    def send(target, hop_headers):
        return _send(session, target.url, hop_headers, timeouts)

    def proxies_for(target_url: str):
        return _environment_settings(session, target_url)[0].get("proxies")

    response, _target = get_following_redirects(url_policy, url, headers, send, max_redirects=max_redirects,
                                                proxies_for=proxies_for)
    return response


def _send(session: requests.Session, url: str, headers: Mapping[str, str], timeouts: Timeouts):
    """One GET, without following redirects: a `requests.Response`, or a
    `MediaResponse` with the same names when the request went straight to the
    connection pool (the usual case, see `_send_to_pool`)."""
    safe_url = redact_url(url)
    # Messages name the exception type, never str(exc): requests puts the full
    # URL, query string and signature included, into its exception text.
    try:
        # `url` is a Target's: ASCII, normalized once by net/targets.py.
        settings, netrc = _environment_settings(session, url)
        request = _prepare_get(session, url, headers, netrc)
        if request is not None:
            return _send_to_pool(session, request, settings, timeouts, safe_url)
        request = session.prepare_request(requests.Request("GET", url, headers=dict(headers)))
        # The adapter, not Session.send: that parses a Location to prepare the next hop
        # even with allow_redirects=False (and raised ValueError on a hostile one).
        response = session.get_adapter(request.url).send(request, timeout=timeouts.for_requests(), **settings)
        extract_cookies_to_jar(session.cookies, request, response.raw)
        return response
    except AddressRefused as exc:
        raise CrawlError(ErrorClass.DISALLOWED_URL, str(exc)) from None
    except (requests.ConnectTimeout, requests.ReadTimeout) as exc:
        raise CrawlError(ErrorClass.NETWORK_TIMEOUT, f"{type(exc).__name__} from {safe_url}") from None
    except (requests.exceptions.InvalidURL, requests.exceptions.InvalidSchema, requests.exceptions.MissingSchema):
        raise CrawlError(ErrorClass.DISALLOWED_URL, f"unusable URL {safe_url}") from None
    except requests.RequestException as exc:
        raise CrawlError(ErrorClass.CONNECTION_RESET, f"{type(exc).__name__} from {safe_url}") from None


class MediaResponse:
    """urllib3's response under the names the downloader reads on a requests.Response."""

    __slots__ = ("raw", "status_code", "headers", "url")

    def __init__(self, raw: urllib3.HTTPResponse, url: str) -> None:
        self.raw, self.status_code, self.headers, self.url = raw, raw.status, raw.headers, url

    def close(self) -> None:  # what requests.Response.close() does for a body read through .raw
        self.raw.close()
        self.raw.release_conn()

    def __enter__(self) -> "MediaResponse":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()


def _send_to_pool(session: requests.Session, request: requests.PreparedRequest, settings: dict,
                  timeouts: Timeouts, safe_url: str) -> MediaResponse:
    """What `Session.send` + `HTTPAdapter.send` do for a body-less GET, minus the Response object.

    The connection (pool, proxy, TLS settings) is chosen by the session's own
    adapter exactly as requests chooses it; what is skipped is requests'
    response wrapping and its cookie bookkeeping on every answer, which cost
    more CPU than the HTTP exchange itself at thousands of files (the media
    answer's cookies are never used: the session takes this path only when it
    holds no cookies, and the API transport keeps using requests in full).
    """
    adapter = session.get_adapter(request.url)
    proxies, verify, cert = settings.get("proxies"), settings.get("verify", True), settings.get("cert")
    try:
        pool = adapter.get_connection_with_tls_context(request, verify, proxies=proxies, cert=cert)
        adapter.cert_verify(pool, request.url, verify, cert)
        raw = pool.urlopen(
            method="GET", url=adapter.request_url(request, proxies), body=None, headers=request.headers,
            redirect=False, assert_same_host=False, preload_content=False, decode_content=False,
            retries=adapter.max_retries, timeout=urllib3.Timeout(connect=timeouts.connect, read=timeouts.read),
            chunked=False,
        )  # fmt: skip
    except urllib3.exceptions.LocationValueError:
        raise CrawlError(ErrorClass.DISALLOWED_URL, f"unusable URL {safe_url}") from None
    except AddressRefused as exc:
        raise CrawlError(ErrorClass.DISALLOWED_URL, str(exc)) from None
    except urllib3.exceptions.MaxRetryError as exc:  # requests' reading of it: only a connect timeout is a timeout
        reason = exc.reason
        timed_out = isinstance(reason, urllib3.exceptions.ConnectTimeoutError) and not isinstance(
            reason, urllib3.exceptions.NewConnectionError)
        error_class = ErrorClass.NETWORK_TIMEOUT if timed_out else ErrorClass.CONNECTION_RESET
        raise CrawlError(error_class, f"{type(reason).__name__} from {safe_url}") from None
    except urllib3.exceptions.ReadTimeoutError:
        raise CrawlError(ErrorClass.NETWORK_TIMEOUT, f"ReadTimeoutError from {safe_url}") from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise CrawlError(ErrorClass.CONNECTION_RESET, f"{type(exc).__name__} from {safe_url}") from None
    return MediaResponse(raw, request.url)


# Per session: origin (+ the session's own proxy/TLS settings) -> requests' merged
# environment settings. Session.request re-reads them on every call (it walks
# os.environ twice for proxies and no_proxy), which cost more CPU per media
# request than the HTTP exchange itself; the environment does not change
# during a crawl, so it is read once per origin.
_SETTINGS_CACHE: "weakref.WeakKeyDictionary[requests.Session, dict[tuple, tuple[dict, bool]]]" = (
    weakref.WeakKeyDictionary())
_SETTINGS_CACHE_MAX = 512


def _prepare_get(session: requests.Session, url: str, headers: Mapping[str, str], netrc: bool):
    """`session.prepare_request` for a body-less GET, or None when the session would add something.

    What prepare_request merges in (cookies, auth, netrc credentials, params,
    request hooks) is usually empty for media downloads; then the request is
    built from the URL and the merged headers alone, which is what
    prepare_request would produce, and it can go straight to the pool. When
    any of them is present, None: the caller lets requests do it all.
    """
    if (session.cookies or session.auth or session.params or any(session.hooks.values())
            or netrc or "@" in urlsplit(url).netloc):
        return None
    prepared = requests.PreparedRequest()
    prepared.prepare_method("GET")
    prepared.prepare_url(url, None)
    prepared.prepare_headers(merge_setting(dict(headers), session.headers, dict_class=CaseInsensitiveDict))
    prepared.prepare_cookies(RequestsCookieJar())
    return prepared


def _environment_settings(session: requests.Session, url: str) -> tuple[dict, bool]:
    """What `Session.request` would pass to `send` for this URL (proxies, env and
    no_proxy included; stream=True; verify, CA bundle variables included; cert),
    and whether a netrc entry would add credentials to the request."""
    parts = urlsplit(url)
    key = (parts.scheme, parts.netloc, session.trust_env, tuple(sorted((session.proxies or {}).items())),
           repr(session.verify), repr(session.cert))
    per_session = _SETTINGS_CACHE.get(session)
    if per_session is None:
        per_session = _SETTINGS_CACHE.setdefault(session, {})
    settings = per_session.get(key)
    if settings is None:
        if len(per_session) >= _SETTINGS_CACHE_MAX:
            per_session.clear()
        settings = session.merge_environment_settings(url, {}, True, None, None)
        settings = (settings, bool(session.trust_env and get_netrc_auth(url)))
        per_session[key] = settings
    return settings


def raise_for_status(response: requests.Response, safe_url: str) -> None:
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

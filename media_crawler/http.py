"""HTTP plumbing shared by the downloader and the API transport.

- `make_session`: a pooled requests.Session with urllib3's own retries switched
  off: every retry decision belongs to the error taxonomy (errors.py), so a
  failure is retried once, by us, with the class's backoff, not silently by
  urllib3 underneath and then again by us.
- `Timeouts`: connect, read (waiting for the response headers) and stall (the
  longest gap between two body chunks).
- `check_url`: the allowlist every URL and every redirect hop passes through.
- `refuse_internal_resolution`: the same rule for where a name resolves to,
  checked by the session's connections (a public-looking name that resolves
  to 127.0.0.1 or 169.254.169.254 is as internal as the address itself).
- `redact_url`, `parse_retry_after`: safe log text and Retry-After in seconds.
"""
from __future__ import annotations

import contextvars
import ipaddress
import time
from contextlib import contextmanager
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Iterator, Sequence
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.util.retry import Retry

from media_crawler.errors import CrawlError, ErrorClass

ALLOWED_SCHEMES = ("http", "https")


@dataclass(frozen=True)
class Timeouts:
    """Seconds. `stall` bounds the silence between body chunks, so a server that
    sends headers and then nothing is a network_timeout, not a hung worker."""

    connect: float = 5.0
    read: float = 30.0
    stall: float = 30.0

    def for_requests(self) -> tuple[float, float]:
        """The (connect, read) pair requests expects for the request itself."""
        return (self.connect, self.read)


def make_session(pool_size: int = 16) -> requests.Session:
    """A Session whose connection pool fits `pool_size` concurrent workers."""
    session = requests.Session()
    # total=0/read=False: urllib3 raises on the first failure and never
    # re-sends a request on its own (see the module docstring).
    no_retries = Retry(total=0, connect=0, read=False, redirect=False, status=0)
    adapter = _GuardedAdapter(pool_connections=pool_size, pool_maxsize=pool_size, max_retries=no_retries)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def check_url(url: str, allowed_hosts: Sequence[str]) -> None:
    """Raise CrawlError(disallowed_url) unless `url` may be fetched.

    Patterns: `*.hdslb.com` matches any subdomain of hdslb.com; `*` matches any
    public host; anything else matches exactly (names and IP literals).
    Internal addresses (loopback, private, link-local such as the cloud
    metadata service 169.254.169.254, `localhost`) are reachable only when
    listed exactly: a wildcard never grants them, so a feed cannot steer the
    crawler into the machine's own network.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ALLOWED_SCHEMES:
        raise CrawlError(ErrorClass.DISALLOWED_URL, f"scheme {scheme or '(none)'!r} is not http(s)")
    try:
        host = (parts.hostname or "").rstrip(".").lower()
    except ValueError:  # malformed IPv6 literal
        host = ""
    if not host:
        raise CrawlError(ErrorClass.DISALLOWED_URL, "URL has no host")
    patterns = [p.strip().rstrip(".").lower() for p in allowed_hosts if p and p.strip()]
    if _matches_exactly(host, patterns):
        return
    if is_internal_host(host):
        raise CrawlError(ErrorClass.DISALLOWED_URL, f"internal host {host} is not listed in allowed hosts")
    if any(_matches_wildcard(host, p) for p in patterns):
        return
    raise CrawlError(ErrorClass.DISALLOWED_URL, f"host {host} is not in allowed hosts")


def is_internal_host(host: str) -> bool:
    """True for names and IP literals that point into the local machine or network."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    address = _ip_or_none(host)
    if address is None:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
    # not is_global covers loopback, private, link-local, reserved and shared
    # (100.64/10) ranges in one test that stays current with Python's IANA table.
    return not address.is_global or address.is_multicast


def _matches_exactly(host: str, patterns: Sequence[str]) -> bool:
    host_ip = _ip_or_none(host)
    for pattern in patterns:
        if pattern == host:
            return True
        pattern_ip = _ip_or_none(pattern.strip("[]"))
        if host_ip is not None and pattern_ip is not None and host_ip == pattern_ip:
            return True  # "::1" listed as "[::1]", or a non-canonical IPv6 spelling
    return False


def _matches_wildcard(host: str, pattern: str) -> bool:
    if pattern == "*":
        return True
    return pattern.startswith("*.") and host.endswith(pattern[1:])


def _ip_or_none(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def redact_url(url: str) -> str:
    """scheme://host[:port]/path, without userinfo, query or fragment.

    Signed CDN URLs carry their signature and tokens in the query string, so
    this is the only form of a URL that may reach a log line or an error message.
    """
    parts = urlsplit(url)
    try:
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        host, port = "(bad host)", ""
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}{port}{parts.path or '/'}"


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Retry-After as seconds from now: delta-seconds or an HTTP date; None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if moment is None:
        return None
    return max(moment.timestamp() - (time.time() if now is None else now), 0.0)


class InternalAddressRefused(Exception):
    """A name resolved to an internal address, and the name is not listed exactly.

    Not an OSError on purpose: urllib3 would take it for a network failure and
    requests would call it a ConnectionError; it is a refusal (disallowed_url).
    """


# The exact (non-wildcard) names the current request's allowlist lists, or None
# outside a guarded request (API calls, whose hosts come from the configuration).
_LISTED_NAMES: contextvars.ContextVar[frozenset[str] | None] = contextvars.ContextVar(
    "media_crawler_listed_names", default=None)


@contextmanager
def refuse_internal_resolution(allowed_hosts: Sequence[str]) -> Iterator[None]:
    """Within this block, the session's connections refuse a name that resolves to
    an internal address unless the allowlist names it exactly (`nas.local` for a
    NAS on the LAN); a wildcard never grants it, as in `check_url`."""
    names = frozenset(p.strip().rstrip(".").lower() for p in allowed_hosts if p and "*" not in p)
    token = _LISTED_NAMES.set(names)
    try:
        yield
    finally:
        _LISTED_NAMES.reset(token)


class _AddressGuard:
    """Mixed into urllib3's connections: remembers whether the peer is internal.

    Checked at connect time, before TLS or a request byte goes out, and again
    before each request, because a kept-alive connection opened for one
    request may be reused by another with a different allowlist. A connection
    through a proxy is not checked: its peer is the proxy the operator chose.
    """

    _peer_internal = False

    def _new_conn(self):
        sock = super()._new_conn()
        if getattr(self, "proxy", None) is None:
            try:
                peer = sock.getpeername()[0]
            except (OSError, IndexError, TypeError):
                peer = None
            self._peer_internal = peer is not None and is_internal_host(str(peer))
        try:
            self._refuse_if_unlisted()
        except InternalAddressRefused:
            sock.close()
            raise
        return sock

    def request(self, *args, **kwargs):
        self._refuse_if_unlisted()
        return super().request(*args, **kwargs)

    def _refuse_if_unlisted(self) -> None:
        listed = _LISTED_NAMES.get()
        if listed is None or not self._peer_internal:
            return
        host = (self.host or "").strip("[]").rstrip(".").lower()
        # An internal literal or `localhost` got here through check_url, which
        # lets those through only when listed exactly.
        if is_internal_host(host) or host in listed:
            return
        raise InternalAddressRefused(f"{host} resolves to an internal address and is not listed in allowed hosts")


class _GuardedHTTPConnection(_AddressGuard, HTTPConnection):
    pass


class _GuardedHTTPSConnection(_AddressGuard, HTTPSConnection):
    pass


class _GuardedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _GuardedHTTPConnection


class _GuardedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _GuardedHTTPSConnection


class _GuardedAdapter(HTTPAdapter):
    def init_poolmanager(self, *args, **kwargs) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _GuardedHTTPPool, "https": _GuardedHTTPSPool}

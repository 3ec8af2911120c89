"""Which proxy, if any, a URL goes through.

One place for this, shared by the media transport (download/media_transport.py,
which dials the proxy itself) and by the pinning check (net/pinning.py
`check_proxied_target`: through a proxy, the target's address is judged before
sending, since the connection's peer is the proxy).

The environment is read the way requests reads it with trust_env: HTTP_PROXY,
HTTPS_PROXY, ALL_PROXY and NO_PROXY (the standard library's reading of them;
NO_PROXY entries are host names and suffixes, not CIDR ranges).
"""
from __future__ import annotations

import re
import threading
import urllib.request
from typing import Callable, Generic, Mapping, TypeVar
from urllib.parse import urlsplit

T = TypeVar("T")


def proxy_for(url: str, proxies: Mapping[str, str] | None) -> str | None:
    """The entry of `proxies` serving `url`, most specific first: "scheme://host",
    "scheme", "all://host", "all" (the keys requests' `proxies` dicts use)."""
    if not proxies:
        return None
    parts = urlsplit(url)
    host = parts.hostname
    keys = (parts.scheme, "all") if host is None else (
        f"{parts.scheme}://{host}", parts.scheme, f"all://{host}", "all")
    for key in keys:
        if proxies.get(key):
            return proxies[key]
    return None


# A URL's scheme://authority when it is plain: ASCII without spaces, controls or IPv6
# brackets, and followed by the path, query or fragment.
_PLAIN_ORIGIN = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[A-Za-z0-9._~!$&'()*+,;=%:@-]*(?=[/?#])")


def _origin_key(url: str) -> str | tuple[str, str]:
    """What PerOrigin files `url`'s answer under: the URL's own scheme://authority text when
    plain (_PLAIN_ORIGIN), else urlsplit's (scheme, netloc). Two URLs with the same plain
    text there have the same scheme and netloc as urlsplit reads them, so an answer for one
    holds for the other. urlsplit itself remembers only its latest 128 URLs, fewer than a
    list has: each media request paid a whole parse for this (twice: the pinning check and
    the transport)."""
    plain = _PLAIN_ORIGIN.match(url)
    if plain is not None:
        return plain.group()
    parts = urlsplit(url)
    return (parts.scheme, parts.netloc)


def environment_proxy(url: str) -> str | None:
    """The proxy the environment names for `url`, or None (none set, or NO_PROXY matches)."""
    proxies = urllib.request.getproxies()
    if not proxies:
        return None
    netloc = urlsplit(url).netloc.rpartition("@")[2]
    if urllib.request.proxy_bypass(netloc):
        return None
    proxy = proxy_for(url, proxies)
    # HTTP_PROXY=proxy.corp:3128 is an http proxy to curl and requests; urllib3 would read
    # "proxy.corp" as the scheme and refuse every request (ProxySchemeUnknown).
    return proxy if proxy is None or "://" in proxy else f"http://{proxy}"


class PerOrigin(Generic[T]):
    """`compute(url)` remembered per origin (scheme, host and port) of the URL.

    For what the environment says about a URL (its proxy, requests' environment
    settings): reading the environment for every request cost more CPU than the
    exchange, and it does not change during a crawl. Bounded, because redirects
    can name any number of hosts.
    """

    def __init__(self, compute: Callable[[str], T], max_origins: int = 512) -> None:
        self._compute = compute
        self._max_origins = max_origins
        self._by_origin: dict[str | tuple[str, str], T] = {}
        self._lock = threading.Lock()

    def __call__(self, url: str) -> T:
        origin = _origin_key(url)
        try:
            return self._by_origin[origin]
        except KeyError:
            pass
        value = self._compute(url)
        with self._lock:
            if len(self._by_origin) >= self._max_origins:
                self._by_origin.clear()
            self._by_origin[origin] = value
        return value

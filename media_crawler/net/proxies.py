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

import urllib.request
from typing import Mapping
from urllib.parse import urlsplit


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


def environment_proxy(url: str) -> str | None:
    """The proxy the environment names for `url`, or None (none set, or NO_PROXY matches)."""
    proxies = urllib.request.getproxies()
    if not proxies:
        return None
    netloc = urlsplit(url).netloc.rpartition("@")[2]
    if urllib.request.proxy_bypass(netloc):
        return None
    return proxy_for(url, proxies)

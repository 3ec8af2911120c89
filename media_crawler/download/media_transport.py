"""The media path's HTTP seam: urllib3 directly, one pinned PoolManager per runtime.

A media GET needs nothing requests adds on top of urllib3: no cookie jar (the
adapter's download_headers say exactly what the CDN gets, and cookies the API
answers set must not ride along to media hosts), no auth or netrc credentials,
no hooks, no Response wrapping. Reaching those through requests meant copying
its send path out of its internals; here the media path talks to urllib3
through `MediaTransport.request` alone.

What is kept, and where:
- every connection dials only an address the URL policy in force admitted
  (the pinned pools of net/pinning.py), so DNS rebinding finds no window;
- redirects are never followed here: `request` is one exchange, and
  net/redirects.py calls it once per hop, each hop checked by the policy;
- proxies come from the environment (net/proxies.py), and through one the
  target is checked by net/pinning.py `check_proxied_target` before sending;
- urllib3 never retries (http.py `NO_RETRIES`: the error taxonomy decides);
- TLS is verified against certifi's bundle, the one requests uses by default, or
  the one REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE names (a TLS-inspecting proxy's CA).
"""
from __future__ import annotations

import functools
import threading
from typing import Mapping, Protocol
from urllib.parse import unquote, urlsplit

import certifi
import urllib3
from urllib3.connectionpool import HTTPConnectionPool
from urllib3.util import make_headers

from media_crawler import __version__
from media_crawler.download.kept_alive import KeptAliveResponse, get_on_kept_alive
from media_crawler.environment import ca_bundle_override
from media_crawler.http import NO_RETRIES, Timeouts
from media_crawler.net.pinning import PINNED_POOL_CLASSES
from media_crawler.net.proxies import PerOrigin, environment_proxy
from media_crawler.net.targets import Target

# What the media path sends unless the request's own headers say otherwise (urllib3
# adds Host). A plain URL list's CDN is told who is asking; platform adapters send
# the User-Agent their CDN expects (platforms/headers.py).
DEFAULT_HEADERS = {"Accept": "*/*", "User-Agent": f"media-crawler/{__version__}"}
# `request`'s proxy when the caller has not looked it up: the transport does.
LOOK_UP = object()


class MediaTransport:
    """Pinned connection pools for media downloads: direct, and one set per proxy."""

    def __init__(self, pool_size: int = 16) -> None:
        self._pool_settings = {"num_pools": pool_size, "maxsize": pool_size, "retries": NO_RETRIES,
                               "cert_reqs": "CERT_REQUIRED", "ca_certs": ca_bundle_override() or certifi.where()}
        self._direct = self._pinned(urllib3.PoolManager(**self._pool_settings))
        self._via_proxy: dict[str, urllib3.PoolManager] = {}
        # The direct manager's pool per origin (scheme, host, port), looked up without urllib3's URL parse.
        self._direct_pools: dict[tuple[str, str, int], HTTPConnectionPool] = {}
        # The environment's proxy for a URL (None: direct), read once per origin.
        self.proxy_for = PerOrigin(environment_proxy)
        self._lock = threading.Lock()

    def request(self, method: str, url: str, headers: Mapping[str, str], *, timeouts: Timeouts,
                preload: bool = False, target: Target | None = None,
                proxy: str | None | object = LOOK_UP) -> urllib3.BaseHTTPResponse | KeptAliveResponse:
        """One exchange with `url`, redirects not followed, body not decoded.

        Call it under net/pinning.py `under_policy` (net/redirects.py does):
        outside one, the connection is refused. preload=False leaves the body
        on the connection for the caller to stream; release_conn() hands the
        connection back. urllib3's exceptions are raised as they are: their
        text holds the URL, so callers report the exception's type only.
        target: `url`'s parse (net/targets.py), when the caller has it: a direct
        request then goes straight to its origin's pool, without urllib3
        parsing the URL again and building the pool key (about 10 us a request),
        and a streamed GET on a connection that pool holds open goes through
        download/kept_alive.py (http.client directly, urllib3's exceptions kept).
        proxy: `proxy_for(url)`, when the caller looked it up already (the redirect
        loop does, to check a proxied target): not looked up twice per request.
        """
        merged = _with_defaults(tuple(headers.items()))
        if proxy is LOOK_UP:
            proxy = self.proxy_for(url)
        if target is not None and proxy is None:
            pool = self._direct_pools.get(target.origin)
            if pool is not None:
                if method == "GET" and not preload:
                    # An open connection of this origin's pool: the lean exchange (download/kept_alive.py).
                    response = get_on_kept_alive(pool, _request_uri(target), merged, timeouts.read)
                    if response is not None:
                        return response
                return pool.urlopen(method, _request_uri(target), assert_same_host=False,
                                    **_urlopen_options(dict(merged), preload, timeouts))
            response = self._direct.urlopen(method, url, **_urlopen_options(dict(merged), preload, timeouts))
            self._remember_direct_pool(target)
            return response
        return self._manager_for(proxy).urlopen(method, url, **_urlopen_options(dict(merged), preload, timeouts))

    def _remember_direct_pool(self, target: Target) -> None:
        # The pool the manager just used for this origin. urllib3 2.x does not close a pool
        # it drops for room (it is garbage once unreferenced), so one remembered here stays
        # usable; close() forgets them all with the manager's. At most num_pools are kept.
        host = f"[{target.host}]" if target.address is not None and target.address.version == 6 else target.host
        with self._lock:
            if len(self._direct_pools) >= self._pool_settings["num_pools"]:
                self._direct_pools.clear()
            self._direct_pools[target.origin] = self._direct.connection_from_host(host, target.port, target.scheme)

    def close(self) -> None:
        with self._lock:
            managers, self._via_proxy = [self._direct, *self._via_proxy.values()], {}
            self._direct_pools = {}
        for manager in managers:
            manager.clear()

    def _manager_for(self, proxy: str | None) -> urllib3.PoolManager:
        if proxy is None:
            return self._direct
        manager = self._via_proxy.get(proxy)
        if manager is None:
            with self._lock:
                manager = self._via_proxy.get(proxy)
                if manager is None:
                    manager = self._via_proxy[proxy] = self._proxy_manager(proxy)
        return manager

    def _proxy_manager(self, proxy: str) -> urllib3.PoolManager:
        # Credentials in the proxy URL go to the proxy only, as Proxy-Authorization.
        parts = urlsplit(proxy)
        proxy_headers = None
        if parts.username:
            credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            proxy_headers = make_headers(proxy_basic_auth=credentials)
        # An http(s) proxy only: urllib3 refuses a socks:// one (ProxySchemeUnknown,
        # a connection_reset for that URL), as requests did without PySocks installed.
        return self._pinned(urllib3.ProxyManager(proxy, proxy_headers=proxy_headers, **self._pool_settings))

    @staticmethod
    def _pinned(manager: urllib3.PoolManager) -> urllib3.PoolManager:
        manager.pool_classes_by_scheme = dict(PINNED_POOL_CLASSES)
        return manager


def _request_uri(target: Target) -> str:
    """The path and query of a Target's URL (scheme://host[:port] then always a `/`)."""
    return target.url[target.url.index("/", len(target.scheme) + 3):]


@functools.lru_cache(maxsize=64)
def _with_defaults(headers: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """DEFAULT_HEADERS under the request's own (name, value) pairs, compared without case
    (the request's "accept" replaces our "Accept"), in sending order: a plain dict of them
    is what urllib3 sends as it is. Remembered: a platform's items share their headers."""
    mine = {name.lower() for name, _ in headers}
    merged = {name: value for name, value in DEFAULT_HEADERS.items() if name.lower() not in mine}
    merged.update(headers)
    return tuple(merged.items())


def _urlopen_options(headers: dict[str, str], preload: bool, timeouts: Timeouts) -> dict:
    """urlopen's keywords for one exchange (made only when urllib3 carries it)."""
    return {"headers": headers, "redirect": False, "retries": NO_RETRIES, "preload_content": preload,
            "decode_content": False, "timeout": _urllib3_timeout(timeouts)}


@functools.lru_cache(maxsize=64)
def _urllib3_timeout(timeouts: Timeouts) -> urllib3.Timeout:
    """urllib3's Timeout of `timeouts` (frozen, a handful per run), made once: urllib3
    clones it per request anyway, so sharing one is safe."""
    return urllib3.Timeout(connect=timeouts.connect, read=timeouts.read)


class CarriesMedia(Protocol):
    """A runtime's session (sessions.CrawlerSession): the API path's, carrying the media path's transport."""

    media: MediaTransport


def media_transport_of(session: MediaTransport | CarriesMedia) -> MediaTransport:
    """The media transport a runtime's session carries (sessions.make_session), or the transport itself."""
    return session if isinstance(session, MediaTransport) else session.media

"""Connections that dial exactly the address the URL policy checked.

requests and urllib3 resolve a host name when they connect; checking the name
earlier, with a lookup of our own, would leave a window in which a DNS answer
changes between the check and the connect (rebinding). Here the connection
itself asks the policy in force (`under_policy`) to resolve and check, and
connects to those addresses only: one lookup, no window. TLS still verifies
the certificate against the host name, which urllib3 keeps as `host`.

A connection opened with no policy in force is refused: every request the
crawler makes names the policy it is made under. urllib3's alone: requests'
adapter over these pools is sessions.py's, so a process whose requests all go
over urllib3 (fetch-urls) never imports requests.
"""
from __future__ import annotations

import contextvars
import socket
import sys
from typing import ContextManager

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util import connection

from media_crawler.http import QuickHeadersResponse
from media_crawler.net.addresses import Address
from media_crawler.net.policy import AddressRefused, UrlPolicy
from media_crawler.net.targets import Target

_POLICY: contextvars.ContextVar[UrlPolicy | None] = contextvars.ContextVar("media_crawler_url_policy", default=None)


def under_policy(policy: UrlPolicy) -> ContextManager[None]:
    """Connections opened (or reused) in this block are checked against `policy`."""
    return _UnderPolicy(policy)


class _UnderPolicy:
    # A class, not a @contextmanager generator: entered for every request (and hop).
    __slots__ = ("_policy", "_token")

    def __init__(self, policy: UrlPolicy) -> None:
        self._policy = policy

    def __enter__(self) -> None:
        self._token = _POLICY.set(self._policy)

    def __exit__(self, *_exc) -> None:
        _POLICY.reset(self._token)


def check_proxied_target(policy: UrlPolicy, target: Target, proxy: str | None) -> None:
    """Through a proxy (`proxy`: the one serving target.url, net/proxies.py), the
    connection's peer is the proxy the operator chose, so the target's name is
    resolved and checked here instead. The proxy resolves it again (the one
    rebinding window this leaves is the proxy's; docs/DESIGN.md says so)."""
    if proxy:
        try:
            policy.resolve(target.host, target.port)
        except socket.gaierror:
            pass  # the proxy will say it cannot resolve it either


def _current_policy() -> UrlPolicy:
    policy = _POLICY.get()
    if policy is None:
        raise AddressRefused("no URL policy is in force for this request")
    return policy


class _PinnedMixin:
    """Mixed into urllib3's connections: resolve through the policy, dial only what it admitted."""

    _dialled: Address | None = None
    # The policy this connection's address was last admitted under (policies are frozen).
    _admitted_under: UrlPolicy | None = None
    # Headers parsed without the email package when they are plain (http.py).
    response_class = QuickHeadersResponse

    def _new_conn(self):
        if getattr(self, "proxy", None) is not None:
            return super()._new_conn()  # the peer is the proxy (see check_proxied_target)
        policy = _current_policy()
        host = (self.host or "").strip("[]").rstrip(".").lower()
        try:
            addresses = policy.resolve(host, self.port)
        except socket.gaierror as exc:
            raise NameResolutionError(self.host, self, exc) from exc
        last_error: OSError | None = None
        for address in addresses:
            try:
                sock = connection.create_connection(
                    (str(address), self.port), self.timeout,
                    source_address=self.source_address, socket_options=self.socket_options)
            except socket.timeout as exc:
                raise ConnectTimeoutError(
                    self, f"Connection to {self.host} timed out. (connect timeout={self.timeout})") from exc
            except OSError as exc:
                last_error = exc
                continue
            self._dialled, self._admitted_under = address, policy  # resolve() admitted it
            sys.audit("http.client.connect", self, self.host, self.port)
            return sock
        # Chained: the cause tells a refusal from a reset (net/connect_errors.py).
        raise NewConnectionError(self, f"Failed to establish a new connection: {last_error}") from last_error

    def request(self, *args, **kwargs):
        judge_reuse(self)
        return super().request(*args, **kwargs)


def judge_reuse(connection: _PinnedMixin) -> None:
    """Before a request on `connection` (urllib3's, or download/kept_alive.py's own GET):
    a kept-alive connection opened under one policy may be reused under another, so
    its address is judged again by the policy of this request (AddressRefused if
    it is not admitted; no policy in force is refused too). The same policy object
    as last time judged this address already: a frozen policy gives the same answer,
    so only another policy is asked again."""
    policy = _current_policy()
    if connection._dialled is not None and policy is not connection._admitted_under and getattr(connection, "proxy", None) is None:
        host = (connection.host or "").strip("[]").rstrip(".").lower()
        if not policy.admits(host, connection.port, connection._dialled):
            raise AddressRefused(f"{host} is connected to internal address {connection._dialled}, not listed here")
        connection._admitted_under = policy


class _PinnedHTTPConnection(_PinnedMixin, HTTPConnection):
    pass


class _PinnedHTTPSConnection(_PinnedMixin, HTTPSConnection):
    pass


class _PinnedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _PinnedHTTPConnection


class _PinnedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _PinnedHTTPSConnection


# For a urllib3 PoolManager's `pool_classes_by_scheme`: every pool it opens is pinned.
PINNED_POOL_CLASSES = {"http": _PinnedHTTPPool, "https": _PinnedHTTPSPool}


"""The requests-based ApiTransport, for the platforms' APIs: requests' cookie jar
carries what an API answer sets to the next call, and its reading of the
environment (proxies, CA bundle, netrc) applies. The GET around the exchange
(policy, redirects, bounded body, hooks, error classes) is platforms/api_get.py's."""
from __future__ import annotations

from typing import Iterable, Mapping

import requests
import urllib3

from media_crawler.errors import ErrorClass
from media_crawler.net.connect_errors import dropped_connection_class
from media_crawler.net.proxies import PerOrigin, proxy_for
from media_crawler.platforms.api_get import (CHUNK, AfterResponse, BeforeRequest, FetchedAnswer, KeepAnswer,
                                             PolicedGet, PolicyFor)
from media_crawler.sessions import make_session

__all__ = ["FetchedAnswer", "RequestsTransport"]  # FetchedAnswer: where the keeper's callers found it first


class RequestsTransport(PolicedGet):
    """platforms/api_get.py's GET over a requests Session (its pinned adapter, sessions.py)."""

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
        super().__init__(policy_for, before_request, after_response, keep_answer)
        self.session = session or make_session()
        self.timeout = (connect_timeout, read_timeout)
        # requests' reading of the environment (proxies, NO_PROXY, CA bundle) for a URL, once per origin.
        self._environment_settings = PerOrigin(
            lambda url: self.session.merge_environment_settings(url, {}, True, None, None))

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

    def _chunks(self, raw: requests.Response) -> Iterable[bytes]:
        return raw.iter_content(CHUNK)  # gzip/deflate undone by requests

    def _header_pairs(self, raw: requests.Response) -> tuple[tuple[str, str], ...]:
        """Every header line of the answer in order, a repeated name (Set-Cookie) kept
        repeated: urllib3's headers, where requests' dict would join them with commas."""
        received = getattr(raw.raw, "headers", None)
        items = received.items() if received is not None else raw.headers.items()
        return tuple((str(name), str(value)) for name, value in items)

    def _failure_class(self, exc: Exception) -> ErrorClass | None:
        if isinstance(exc, requests.Timeout):  # before ConnectionError: ConnectTimeout is both
            return ErrorClass.NETWORK_TIMEOUT
        if isinstance(exc, (requests.RequestException, urllib3.exceptions.HTTPError, OSError)):
            return dropped_connection_class(exc)
        return None

"""The download engine's GET: the same request requests' own prepare_request would
build, sent straight to the session's connection pool (proxies and TLS chosen by
requests' adapter), and requests in full whenever cookies, auth or hooks must be merged in."""
from __future__ import annotations

import socket

import pytest
import requests

from media_crawler.download.responses import MediaResponse, _environment_settings, _prepare_get, _send
from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.http import Timeouts, make_session
from media_crawler.net.pinning import under_policy
from media_crawler.net.policy import UrlPolicy
from media_crawler_tests.download.httpserver import Reply


@pytest.fixture(autouse=True)
def any_host_policy():
    """`_send` is the step under the redirect loop, which sets the policy in force."""
    with under_policy(UrlPolicy.from_entries(["*", "127.0.0.1:*"])):
        yield

URLS = [
    "https://i0.hdslb.com/bfs/archive/abc.jpg?x=1&y=%20z",
    "http://127.0.0.1:8765/media/urls/demo/tiny.jpg",
    "https://cdn.example.org/ファイル name.jpg",
]
HEADERS = {"Referer": "https://www.bilibili.com/", "Accept-Encoding": "identity", "User-Agent": "mc-test"}


def full(session, url):
    return session.prepare_request(requests.Request("GET", url, headers=dict(HEADERS)))


def test_a_plain_session_gets_the_request_prepare_request_would_build():
    session = make_session()
    for url in URLS:
        lean, reference = _prepare_get(session, url, HEADERS, netrc=False), full(session, url)
        assert (lean.method, lean.url, lean.body) == (reference.method, reference.url, reference.body)
        assert dict(lean.headers) == dict(reference.headers)


def test_cookies_auth_and_credentials_in_the_url_leave_it_to_requests():
    session = make_session()
    session.cookies.set("SESSDATA", "cookie-value", domain="cdn.example.org")
    assert _prepare_get(session, "https://cdn.example.org/a.jpg", HEADERS, netrc=False) is None
    session = make_session()
    session.auth = ("user", "secret")
    assert _prepare_get(session, "https://cdn.example.org/a.jpg", HEADERS, netrc=False) is None
    assert _prepare_get(make_session(), "https://u:p@cdn.example.org/a.jpg", HEADERS, netrc=False) is None


def test_a_plain_session_goes_straight_to_the_pool_and_reuses_the_connection(server):
    body = b"\xff\xd8\xff" + b"x" * 5000
    url = server.route("/a.jpg", Reply(body, content_type="image/jpeg"))
    session = make_session()
    for _ in range(2):
        with _send(session, url, HEADERS, Timeouts()) as response:
            assert isinstance(response, MediaResponse) and response.status_code == 200
            assert response.headers.get("content-type") == "image/jpeg"
            assert response.raw.read() == body
            response.raw.release_conn()
    first, second = server.requests_to("/a.jpg")
    assert first.client_port == second.client_port  # one keep-alive connection
    assert first.headers["Referer"] == "https://www.bilibili.com/" and first.headers["User-Agent"] == "mc-test"


def test_session_cookies_still_reach_the_server_through_requests(server):
    url = server.route("/c.jpg", Reply(b"\xff\xd8\xff" + b"x" * 100, content_type="image/jpeg"))
    session = make_session()
    session.cookies.set("SESSDATA", "cookie-value", domain="127.0.0.1")
    with _send(session, url, HEADERS, Timeouts()) as response:
        assert not isinstance(response, MediaResponse) and response.status_code == 200
    assert server.requests_to("/c.jpg")[0].headers["Cookie"] == "SESSDATA=cookie-value"


def test_the_pool_path_uses_the_environment_proxy(server, monkeypatch):
    """An HTTP proxy from the environment gets the absolute URL, as with requests."""
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", server.url(""))
    server.route("/via-proxy.jpg", Reply(b"\xff\xd8\xff" + b"y" * 100, content_type="image/jpeg"))
    with _send(make_session(), "http://media.example.test/via-proxy.jpg", HEADERS, Timeouts()) as response:
        assert response.status_code == 200 and response.raw.read().startswith(b"\xff\xd8\xff")
    (logged,) = server.requests_to("/via-proxy.jpg")
    assert logged.headers["Host"] == "media.example.test"


def test_connection_failures_are_classified_on_the_pool_path():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(CrawlError) as info:
        _send(make_session(), f"http://127.0.0.1:{port}/a.jpg?token=secret", HEADERS, Timeouts(connect=2))
    assert info.value.error_class is ErrorClass.CONNECTION_RESET and "secret" not in info.value.message


def test_environment_settings_are_read_once_per_origin(monkeypatch):
    session = make_session()
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    settings, netrc = _environment_settings(session, "https://cdn.example.org/a.jpg")
    assert settings["proxies"].get("https") == "http://proxy.internal:3128" and settings["stream"] is True
    bypass, _ = _environment_settings(session, "http://127.0.0.1:9/a.jpg")
    assert "http" not in bypass["proxies"] or not bypass["proxies"].get("http")
    monkeypatch.setenv("HTTPS_PROXY", "http://other:1")
    assert _environment_settings(session, "https://cdn.example.org/b.jpg")[0] is settings  # cached per origin

"""The download engine's GET preparation: the same request requests' own prepare_request
would build, and the full path whenever cookies, auth or hooks must be merged in."""
from __future__ import annotations

import requests

from media_crawler.download.responses import _environment_settings, _prepare_get
from media_crawler.http import make_session

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


def test_cookies_auth_and_hooks_take_the_full_path():
    session = make_session()
    session.cookies.set("SESSDATA", "cookie-value", domain="cdn.example.org")
    prepared = _prepare_get(session, "https://cdn.example.org/a.jpg", HEADERS, netrc=False)
    assert prepared.headers["Cookie"] == "SESSDATA=cookie-value"

    session = make_session()
    session.auth = ("user", "secret")
    assert "Authorization" in _prepare_get(session, "https://cdn.example.org/a.jpg", HEADERS, netrc=False).headers
    prepared = _prepare_get(make_session(), "https://u:p@cdn.example.org/a.jpg", HEADERS, netrc=False)
    assert "Authorization" in prepared.headers


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

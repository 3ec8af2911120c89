"""net/proxies.py: which proxy serves a URL, most specific entry first, NO_PROXY honoured."""
from __future__ import annotations

from media_crawler.net.proxies import environment_proxy, proxy_for


def test_the_most_specific_entry_wins():
    proxies = {"all": "http://any:1", "https": "http://tls:2", "https://cdn.example.org": "http://cdn:3"}
    assert proxy_for("https://cdn.example.org/a.jpg", proxies) == "http://cdn:3"
    assert proxy_for("https://other.example.org/a.jpg", proxies) == "http://tls:2"
    assert proxy_for("http://other.example.org/a.jpg", proxies) == "http://any:1"
    assert proxy_for("http://other.example.org/a.jpg", {"https": "http://tls:2"}) is None
    assert proxy_for("http://x.test/", None) is None and proxy_for("http://x.test/", {"http": ""}) is None


def test_the_environment_is_read_with_no_proxy(monkeypatch):
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,.internal.example")
    assert environment_proxy("https://cdn.example.org/a.jpg") == "http://proxy.internal:3128"
    assert environment_proxy("http://localhost:8080/a.jpg") is None
    assert environment_proxy("https://media.internal.example/a.jpg") is None


def test_a_proxy_named_without_a_scheme_is_an_http_one(monkeypatch):
    """As curl and requests read HTTP_PROXY=host:port (urllib3 would take "proxy.internal" for a scheme)."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "NO_PROXY", "ALL_PROXY", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "proxy.internal:3128")
    assert environment_proxy("https://cdn.example.org/a.jpg") == "http://proxy.internal:3128"
    monkeypatch.setenv("HTTPS_PROXY", "https://proxy.internal:3129")
    assert environment_proxy("https://cdn.example.org/a.jpg") == "https://proxy.internal:3129"

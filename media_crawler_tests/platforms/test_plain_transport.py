"""The plain API transport (platforms/plain_transport.py, a URL list's feed over urllib3):
the same answers, refusals and error classes as the requests one, against a real local server."""
from __future__ import annotations

import gzip
import socket

import pytest

from media_crawler.download.media_transport import MediaTransport
from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.net.policy import UrlPolicy
from media_crawler.platforms import api_get
from media_crawler.platforms.plain_transport import PlainTransport
from media_crawler_tests.download.httpserver import Reply, ScriptedServer
from media_crawler_tests.download.test_kept_alive import tls_server  # noqa: F401 - a fixture


@pytest.fixture
def server():
    with ScriptedServer() as scripted:
        yield scripted


def transport_for(server: ScriptedServer, **hooks) -> PlainTransport:
    policy = UrlPolicy.from_entries(["*", f"127.0.0.1:{server.port}"])
    return PlainTransport(MediaTransport(4), policy_for=lambda _platform: policy, read_timeout=2, **hooks)


def test_a_gzip_answer_is_decoded_and_handed_to_the_hooks(server):
    body = '{"items": [], "note": "这里"}'.encode("utf-8")
    server.route("/feed.json", Reply(gzip.compress(body), content_type="application/json; charset=utf-8",
                                     headers={"Content-Encoding": "gzip", "Set-Cookie": "a=1"}))
    seen, kept = [], []
    transport = transport_for(server, before_request=lambda p: seen.append(("before", p)),
                              after_response=lambda p, r: seen.append(("after", p, r.status)), keep_answer=kept.append)
    answer = transport.get("urls", server.url("/feed.json"), params={"page": 2})
    assert answer.status == 200 and answer.json() == {"items": [], "note": "这里"}
    assert answer.url == server.url("/feed.json") + "?page=2"
    assert seen == [("before", "urls"), ("after", "urls", 200)]
    assert kept[0].body == body and ("Set-Cookie", "a=1") in kept[0].headers and kept[0].status == 200
    (request,) = server.requests_to("/feed.json")
    sent = {name.lower(): value for name, value in request.headers.items()}
    assert "gzip" in sent["accept-encoding"] and request.query == "page=2"


def test_a_declared_charset_is_honoured_and_an_unknown_one_read_as_utf8(server):
    server.route("/latin.json", Reply('{"n": "é"}'.encode("latin-1"), content_type="application/json; charset=ISO-8859-1"))
    server.route("/odd.json", Reply(b'{"n": 1}', content_type="application/json; charset=no-such-charset"))
    transport = transport_for(server)
    assert transport.get("urls", server.url("/latin.json")).json() == {"n": "é"}
    assert transport.get("urls", server.url("/odd.json")).json() == {"n": 1}


def test_http_errors_are_returned_not_raised(server):
    server.route("/down.json", Reply(b"down", status=503, content_type="text/plain"))
    answer = transport_for(server).get("urls", server.url("/down.json"))
    assert answer.status == 503 and answer.text == "down"


def test_a_redirect_to_an_internal_address_is_refused_before_any_connect(server):
    server.route("/feed.json", Reply(redirect_to="http://169.254.169.254/latest/meta-data/"))
    with pytest.raises(CrawlError) as caught:
        transport_for(server).get("urls", server.url("/feed.json"))
    assert caught.value.error_class == ErrorClass.DISALLOWED_URL


def test_a_body_past_the_limit_is_too_large(server, monkeypatch):
    monkeypatch.setattr(api_get, "MAX_API_BODY_BYTES", 1000)
    server.route("/big.json", Reply(b"[" + b"0," * 2000 + b"0]", content_type="application/json", send_length=False))
    with pytest.raises(CrawlError) as caught:
        transport_for(server).get("urls", server.url("/big.json"))
    assert caught.value.error_class == ErrorClass.TOO_LARGE


def test_a_refused_connection_is_connection_refused():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    policy = UrlPolicy.from_entries([f"127.0.0.1:{port}"])
    transport = PlainTransport(MediaTransport(4), policy_for=lambda _platform: policy)
    with pytest.raises(CrawlError) as caught:
        transport.get("urls", f"http://127.0.0.1:{port}/feed.json?token=s3cr3t")
    assert caught.value.error_class == ErrorClass.CONNECTION_REFUSED
    assert "s3cr3t" not in caught.value.message


def test_a_stalled_body_is_a_network_timeout(server):
    server.route("/stall.json", Reply(b'{"items": [' + b" " * 5000 + b"]}", content_type="application/json", stall_at=10))
    policy = UrlPolicy.from_entries([f"127.0.0.1:{server.port}"])
    transport = PlainTransport(MediaTransport(4), policy_for=lambda _platform: policy, read_timeout=0.3)
    with pytest.raises(CrawlError) as caught:
        transport.get("urls", server.url("/stall.json"))
    assert caught.value.error_class == ErrorClass.NETWORK_TIMEOUT


def test_a_charset_that_names_no_text_encoding_is_read_as_utf8(server):
    """Python knows these names, but not as text encodings (base64, zlib, hex: bytes.decode
    raises LookupError) or not with errors replaced (idna, undefined, and punycode on
    non-ASCII bytes: UnicodeError). A feed that declares one is read as UTF-8, as one naming
    an unknown charset, not a traceback."""
    transport = transport_for(server)
    for charset in ("base64", "zlib", "hex", "idna", "undefined", "punycode"):
        server.route(f"/{charset}.json", Reply('{"n": "é"}'.encode(), content_type=f"application/json; charset={charset}"))
        assert transport.get("urls", server.url(f"/{charset}.json")).json() == {"n": "é"}, charset


def test_a_content_length_in_other_digits_is_no_declared_size(server):
    """"²" is a digit to str.isdigit() but no number to int(): http.client and urllib3 ignore
    such a Content-Length and read the body to the connection's end; so does the bound."""
    server.route("/feed.json", Reply(b'{"items": []}', content_type="application/json", send_length=False,
                                     headers={"Content-Length": "\u00b2"}))
    assert transport_for(server).get("urls", server.url("/feed.json")).json() == {"items": []}


def test_a_gzip_bomb_is_refused_without_inflating_it_whole(server, monkeypatch):
    """64 MiB of spaces in some 64 KB of gzip: refused past the limit, and never inflated more
    than a chunk at a time (urllib3 before 2.6 inflated each raw read whole: one 64 KiB read
    of this is the whole 64 MiB; pyproject.toml's floor keeps such a urllib3 out)."""
    import tracemalloc

    monkeypatch.setattr(api_get, "MAX_API_BODY_BYTES", 1024**2)
    bomb = gzip.compress(b" " * (64 * 1024**2), compresslevel=9)
    server.route("/bomb.json", Reply(bomb, content_type="application/json", headers={"Content-Encoding": "gzip"}))
    transport = transport_for(server)
    tracemalloc.start()
    try:
        with pytest.raises(CrawlError) as caught:
            transport.get("urls", server.url("/bomb.json"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.error_class == ErrorClass.TOO_LARGE
    assert peak < 8 * 1024**2, f"{peak} bytes allocated at the peak"


def test_through_a_proxy_a_name_resolving_to_an_internal_address_is_refused_before_sending(server, monkeypatch):
    """The proxy (the scripted server: it answers an absolute-form GET by its path) is the
    connection's peer, so the feed's host is resolved and judged before anything is sent:
    `vm` is 127.0.0.1 in /etc/hosts, which no entry lists. A name the proxy alone can
    resolve goes through it."""
    if "vm" not in open("/etc/hosts").read().split():
        pytest.skip("needs a host name that /etc/hosts maps to 127.0.0.1")
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "NO_PROXY", "ALL_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.port}")
    server.route("/feed.json", Reply(b'{"items": []}', content_type="application/json"))
    transport = PlainTransport(MediaTransport(2), policy_for=lambda _platform: UrlPolicy.from_entries(["*"]))
    with pytest.raises(CrawlError) as caught:
        transport.get("urls", "http://vm:8080/feed.json")
    assert caught.value.error_class == ErrorClass.DISALLOWED_URL
    assert server.requests_to("/feed.json") == []
    assert transport.get("urls", "http://feed.invalid/feed.json").json() == {"items": []}
    (request,) = server.requests_to("/feed.json")


def test_a_proxy_named_without_its_scheme_is_an_http_one(server, monkeypatch):
    """HTTP_PROXY=host:port, as curl and requests read it: http:// (urllib3 alone refuses it)."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "NO_PROXY", "ALL_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"127.0.0.1:{server.port}")
    server.route("/feed.json", Reply(b'{"items": []}', content_type="application/json"))
    transport = PlainTransport(MediaTransport(2), policy_for=lambda _platform: UrlPolicy.from_entries(["*"]))
    assert transport.get("urls", "http://feed.invalid/feed.json").json() == {"items": []}


def test_the_feed_over_tls_is_verified_against_the_ca_bundle(tls_server, monkeypatch):
    """The test's CA, named by REQUESTS_CA_BUNDLE, is trusted; without it (certifi's bundle)
    the same server is refused, in one line that keeps the URL's token out."""
    tls_server.route("/feed.json", Reply(b'{"items": []}', content_type="application/json"))
    url = f"https://127.0.0.1:{tls_server.port}/feed.json?token=s3cr3t-value"
    policy = UrlPolicy.from_entries([f"127.0.0.1:{tls_server.port}"])
    assert PlainTransport(MediaTransport(2), policy_for=lambda _platform: policy).get("urls", url).json() == {"items": []}
    monkeypatch.delenv("REQUESTS_CA_BUNDLE")
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    with pytest.raises(CrawlError) as caught:
        PlainTransport(MediaTransport(2), policy_for=lambda _platform: policy).get("urls", url)
    assert caught.value.error_class == ErrorClass.CONNECTION_RESET
    assert "CERTIFICATE_VERIFY_FAILED" in caught.value.message
    assert "\n" not in caught.value.message and "s3cr3t" not in caught.value.message
    assert len(tls_server.requests_to("/feed.json")) == 1  # nothing was sent to the untrusted server

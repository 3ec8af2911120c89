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

"""Pinned connections: one lookup per connection, the connection dials exactly the address the
policy checked (a rebinding resolver cannot swap it), TLS-less and proxied paths keep the rules."""
from __future__ import annotations

import socket

import pytest

from media_crawler.download.fetcher import download_to_part
from media_crawler.download.request import DownloadPolicy, DownloadRequest
from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.sessions import make_session
from media_crawler.net.addresses import is_internal_address, parse_address
from media_crawler.net.policy import UrlPolicy
from media_crawler_tests.download.httpserver import Reply, ScriptedServer
from media_crawler_tests.net.connect_recorder import ConnectRecorder

JPEG = b"\xff\xd8\xff" + b"j" * 2000
PUBLIC = "93.184.216.34"
ANY_HOST = DownloadPolicy(max_bytes=10**6, url_policy=UrlPolicy.from_entries(["*"]))


class FlippingResolver(dict):
    """A rebinding DNS server: the first answer is public, every later one internal."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name, self.lookups = name, 0

    def __contains__(self, key) -> bool:
        return key == self.name

    def __getitem__(self, key):
        self.lookups += 1
        return [PUBLIC] if self.lookups == 1 else ["169.254.169.254"]


@pytest.fixture
def server():
    with ScriptedServer() as running:
        yield running


def test_a_rebinding_name_is_looked_up_once_and_the_checked_address_is_dialled(server, monkeypatch, tmp_path):
    server.route("/a.jpg", Reply(JPEG, content_type="image/jpeg"))
    resolver = FlippingResolver("flip.example.test")
    recorder = ConnectRecorder(local_ports={server.port}, aliases={(PUBLIC, 80): ("127.0.0.1", server.port)},
                               names=resolver).install(monkeypatch)
    session = make_session()
    result = download_to_part(session, DownloadRequest("http://flip.example.test/a.jpg", tmp_path / "a.part"), ANY_HOST)
    assert result.size == len(JPEG)
    assert resolver.lookups == 1  # no second lookup: nothing for the rebinding answer to win
    assert recorder.attempted() == {(PUBLIC, 80)}


def test_every_answer_of_a_name_is_judged_and_a_mixed_answer_refused(server, monkeypatch, tmp_path):
    recorder = ConnectRecorder(local_ports={server.port}, names={"mixed.example.test": [PUBLIC, "10.0.0.7"]})
    recorder.install(monkeypatch)
    with pytest.raises(CrawlError) as caught:
        download_to_part(make_session(), DownloadRequest("http://mixed.example.test/a.jpg", tmp_path / "a.part"),
                         ANY_HOST)
    assert caught.value.error_class is ErrorClass.DISALLOWED_URL and "10.0.0.7" in caught.value.message
    assert recorder.connects == []


def test_a_request_outside_any_policy_is_refused(server):
    session = make_session()
    server.route("/a.jpg", Reply(JPEG))
    with pytest.raises(Exception) as caught:
        session.get(server.url("/a.jpg"), timeout=2)
    assert "no URL policy" in str(caught.value)
    assert server.requests_to("/a.jpg") == []


def test_through_a_proxy_the_target_is_still_checked(server, monkeypatch, tmp_path):
    """The proxy is the connection's peer, so the target's name is resolved and judged before sending."""
    monkeypatch.setenv("HTTP_PROXY", server.url(""))
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    ConnectRecorder(local_ports={server.port}, names={"meta.example.test": ["169.254.169.254"]}).install(monkeypatch)
    with pytest.raises(CrawlError) as caught:
        download_to_part(make_session(), DownloadRequest("http://meta.example.test/latest/", tmp_path / "a.part"),
                         ANY_HOST)
    assert caught.value.error_class is ErrorClass.DISALLOWED_URL
    assert server.log == []  # the proxy was never asked


@pytest.mark.parametrize("text", [
    "127.0.0.1", "10.1.2.3", "172.20.0.1", "192.168.9.9", "100.64.0.1", "169.254.169.254", "0.0.0.0", "224.1.1.1",
    "255.255.255.255", "198.18.0.1", "::1", "::", "fe80::1", "fc00::1", "ff02::1", "::ffff:127.0.0.1",
    "::127.0.0.1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::1", "2002:a9fe:a9fe::1", "::ffff:0:a9fe:a9fe", "2001:db8::1",
])
def test_internal_addresses_in_every_spelling(text):
    assert is_internal_address(parse_address(text))


@pytest.mark.parametrize("text", ["93.184.216.34", "8.8.4.4", "2606:4700::1111", "64:ff9b::5db8:d822",
                                  "2002:5db8:d822::1"])
def test_public_addresses_are_public(text):
    assert not is_internal_address(parse_address(text))


@pytest.mark.parametrize(("entry", "allowed", "refused"), [
    ("127.0.0.1:8787", "http://127.0.0.1:8787/a", "http://127.0.0.1:8788/a"),
    ("http://127.0.0.1:8787/feed.json", "http://127.0.0.1:8787/b", "http://127.0.0.1/b"),
    ("nas.local", "https://nas.local/a", None),
    ("[::1]:9000", "http://[::1]:9000/", "http://[::1]:9001/"),
    ("127.0.0.1:*", "http://127.0.0.1:1234/", "http://127.0.0.2:1234/"),
])
def test_an_internal_host_is_allowed_on_the_port_it_was_listed_with(entry, allowed, refused):
    policy = UrlPolicy.from_entries([entry])
    policy.check(allowed)
    if refused:
        with pytest.raises(CrawlError):
            policy.check(refused)


def test_a_listed_name_may_resolve_internally_only_on_its_port():
    policy = UrlPolicy.from_entries(["nas.local:8080", "*"])
    assert policy.admits("nas.local", 8080, parse_address("192.168.1.5"))
    assert not policy.admits("nas.local", 22, parse_address("192.168.1.5"))
    assert not policy.admits("cdn.example.org", 443, parse_address("192.168.1.5"))


def test_a_policy_of_no_entries_admits_no_host():
    """UrlPolicy() is the empty list: every public host is not listed, every internal one refused."""
    empty = UrlPolicy()
    for url, error_class in (("https://cdn.example.org/a.jpg", ErrorClass.HOST_NOT_ALLOWED),
                             ("http://127.0.0.1:8080/", ErrorClass.DISALLOWED_URL)):
        with pytest.raises(CrawlError) as info:
            empty.check(url)
        assert info.value.error_class is error_class
    assert not empty.admits("nas.local", 8080, parse_address("192.168.1.5"))


def test_a_listed_name_is_admitted_and_a_suffix_pattern_admits_names_only():
    policy = UrlPolicy.from_entries(["cdn.example.org", "*.hdslb.com", "*.34"])
    assert policy.check("https://cdn.example.org/a.jpg").host == "cdn.example.org"
    assert policy.check("https://cdn.example.org:8443/a.jpg").port == 8443  # a public name: any port
    assert policy.check("https://i0.hdslb.com/a.jpg").host == "i0.hdslb.com"
    for url in ("https://other.example.org/a.jpg", "http://93.184.216.34/a.jpg"):
        with pytest.raises(CrawlError) as info:
            policy.check(url)  # a *.domain pattern is for names: an address literal is not "under" it
        assert info.value.error_class is ErrorClass.HOST_NOT_ALLOWED


def test_an_https_name_is_judged_by_its_answers_before_connecting(monkeypatch, tmp_path):
    """HTTPS pools are pinned as HTTP ones are: the refusal comes before any TLS handshake."""
    recorder = ConnectRecorder(local_ports=set(), names={"mixed.example.test": [PUBLIC, "10.0.0.7"]})
    recorder.install(monkeypatch)
    with pytest.raises(CrawlError) as caught:
        download_to_part(make_session(), DownloadRequest("https://mixed.example.test/a.jpg", tmp_path / "a.part"),
                         ANY_HOST)
    assert caught.value.error_class is ErrorClass.DISALLOWED_URL and "10.0.0.7" in caught.value.message
    assert recorder.connects == []


def test_through_a_proxy_an_admitted_target_is_fetched(server, monkeypatch, tmp_path):
    monkeypatch.setenv("HTTP_PROXY", server.url(""))
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    server.route("/a.jpg", Reply(JPEG, content_type="image/jpeg"))
    ConnectRecorder(local_ports={server.port}, names={"cdn.example.test": [PUBLIC]}).install(monkeypatch)
    result = download_to_part(make_session(), DownloadRequest("http://cdn.example.test/a.jpg", tmp_path / "a.part"),
                              ANY_HOST)
    assert result.size == len(JPEG) and len(server.requests_to("/a.jpg")) == 1


def test_a_name_is_dialled_once_per_address_whatever_the_resolver_repeats(monkeypatch):
    answers = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (PUBLIC, 443))] * 2 + [
        (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("2606:2800:220:1::1%eth0", 443, 0, 1))]
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: answers)
    found = UrlPolicy.from_entries(["*"]).resolve("cdn.example.test", 443)
    assert found == [parse_address(PUBLIC), parse_address("2606:2800:220:1::1")]


@pytest.mark.parametrize(("entries", "allowed", "refused"), [
    (["[::1]"], ["http://[::1]/", "https://[::1]/"], ["http://[::1]:8080/"]),  # a bare host: ports 80 and 443
    (["127.0.0.1:*", "127.0.0.1:8080"], ["http://127.0.0.1:9999/"], []),  # any port stays any port
    (["127.0.0.1:8080", "127.0.0.1:*"], ["http://127.0.0.1:9999/"], []),
    ([None, "", "*"], ["http://93.184.216.34/a.jpg"], ["http://10.0.0.1/"]),  # blank entries are skipped
])
def test_listed_ports_combine(entries, allowed, refused):
    policy = UrlPolicy.from_entries(entries)
    for url in allowed:
        policy.check(url)
    for url in refused:
        with pytest.raises(CrawlError):
            policy.check(url)


def test_origins_named_elsewhere_are_host_not_allowed_and_blank_or_any_port_ones_are_skipped():
    policy = UrlPolicy.from_settings(["cdn.example.org"], settings="platforms.weibo.media_hosts",
                                     named_elsewhere=[None, "", "127.0.0.1:*", "http://127.0.0.1:8787/api",
                                                      "localhost:8080"])
    with pytest.raises(CrawlError) as caught:
        policy.check("http://localhost:8080/x")
    assert "add 'localhost:8080' there and" in caught.value.message  # an origin: no *.domain hint for it
    with pytest.raises(CrawlError) as caught:
        policy.check("http://127.0.0.1:8787/x")
    assert caught.value.error_class is ErrorClass.HOST_NOT_ALLOWED
    assert "add '127.0.0.1:8787' there and" in caught.value.message  # no *.domain hint for an origin
    with pytest.raises(CrawlError) as caught:
        policy.check("http://127.0.0.1:9999/x")  # any port of it was named: no (host, port) to point at
    assert caught.value.error_class is ErrorClass.DISALLOWED_URL


def test_a_refusal_names_the_host_and_hints_at_patterns_only_for_names():
    policy = UrlPolicy.from_settings(["cdn.example.org"], settings="platforms.weibo.media_hosts")
    with pytest.raises(CrawlError) as named:
        policy.check("https://img.example.net/a.jpg")
    assert named.value.message == ("host img.example.net is not listed in platforms.weibo.media_hosts: add "
                                   "'img.example.net' there (or a *.domain pattern for a CDN) and re-run the partition")
    with pytest.raises(CrawlError) as literal:
        policy.check("http://93.184.216.34/a.jpg")  # a public address: admitted by no entry, and no pattern fits it
    assert literal.value.error_class is ErrorClass.HOST_NOT_ALLOWED and "pattern" not in literal.value.message

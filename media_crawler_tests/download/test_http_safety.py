"""The URL policy (net/policy.py: internal hosts, wildcards, schemes, ports) with the pinned session; redaction, Retry-After, session retries."""
from __future__ import annotations

import pytest

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.http import parse_retry_after, redact_url
from media_crawler.sessions import make_session
from media_crawler.net.policy import UrlPolicy


def check_url(url, entries):
    return UrlPolicy.from_entries(entries).check(url)

CDN = ("*.hdslb.com", "wx1.sinaimg.cn")


@pytest.mark.parametrize(
    "url, allowed",
    [
        ("https://upos-sz-mirrorali.bilivideo.hdslb.com/a.m4s?deadline=1", CDN),
        ("https://i0.hdslb.com/bfs/a.jpg", CDN),
        ("https://WX1.sinaimg.cn./large/a.jpg", CDN),  # case and a trailing dot do not matter
        ("http://127.0.0.1:8787/media/a.jpg", ("127.0.0.1:8787",)),  # the simulator, listed with its port
        ("http://[::1]:8787/a.jpg", ("[::1]:8787",)),
        ("http://nas.local/a.jpg", ("nas.local",)),  # listed without a port: 80 and 443
        ("https://example.org/a.jpg", ("*",)),
    ],
)
def test_allowed_urls_pass(url, allowed):
    check_url(url, allowed)


@pytest.mark.parametrize(
    "url, allowed",
    [
        ("https://hdslb.com.evil.example/a.jpg", CDN),
        ("https://evilhdslb.com/a.jpg", CDN),
        ("https://hdslb.com/a.jpg", CDN),  # *.x matches subdomains, not x itself
        ("https://wx2.sinaimg.cn/a.jpg", CDN),
    ],
)
def test_public_hosts_no_entry_lists_are_host_not_allowed(url, allowed):
    """A settings matter, not a hostile URL: the item fails (not gone) and a re-run after listing fetches it."""
    with pytest.raises(CrawlError) as caught:
        check_url(url, allowed)
    assert caught.value.error_class is ErrorClass.HOST_NOT_ALLOWED
    assert url.split("/")[2].lower().rstrip(".") in caught.value.message


def test_a_refusal_names_the_setting_to_change():
    policy = UrlPolicy.from_settings(CDN, settings="platforms.weibo.media_hosts or allow_hosts")
    with pytest.raises(CrawlError) as caught:
        policy.check("https://video.weibocdn.example/a.mp4")
    assert caught.value.message.startswith(
        "host video.weibocdn.example is not listed in platforms.weibo.media_hosts or allow_hosts: "
        "add 'video.weibocdn.example' there")


def test_an_internal_origin_the_deployment_names_elsewhere_is_host_not_allowed_and_no_other_is():
    """Media on the platform's own API origin (a simulator, a NAS) are the operator's server: listing it
    is the fix. Any other internal address, the same host on another port included, stays hostile."""
    policy = UrlPolicy.from_settings(CDN, settings="platforms.bilibili.media_hosts or allow_hosts",
                                     named_elsewhere=["http://127.0.0.1:8787/api"])
    with pytest.raises(CrawlError) as caught:
        policy.check("http://127.0.0.1:8787/media/a.jpg")
    assert caught.value.error_class is ErrorClass.HOST_NOT_ALLOWED and "'127.0.0.1:8787'" in caught.value.message
    for hostile in ("http://127.0.0.1:6379/", "http://169.254.169.254/latest/", "http://localhost:8787/a.jpg"):
        with pytest.raises(CrawlError) as caught:
            policy.check(hostile)
        assert caught.value.error_class is ErrorClass.DISALLOWED_URL, hostile


@pytest.mark.parametrize(
    "url, allowed",
    [
        ("file:///etc/passwd", ("*",)),
        ("ftp://i0.hdslb.com/a.jpg", CDN),
        ("http:///nohost", ("*",)),
        ("http://169.254.169.254/latest/meta-data/", ("*",)),
        ("http://localhost:8080/", ("*",)),
        ("http://api.localhost/", ("*",)),
        ("http://127.0.0.1/", ("*",)),
        ("http://10.1.2.3/", ("*",)),
        ("http://192.168.0.1/", ("*",)),
        ("http://[::1]/", ("*",)),
        ("http://[::ffff:127.0.0.1]/", ("*",)),
        ("http://0.0.0.0/", ("*",)),
        ("http://127.0.0.1@evil.example/", CDN),  # userinfo trick: the host is evil.example
        ("http://localhost/", ("127.0.0.1",)),  # listing the IP does not list the name
        ("http://127.0.0.1:8788/", ("127.0.0.1:8787",)),  # an internal host only on the port listed
        ("http://127.0.0.1:8787/", ("127.0.0.1",)),  # no port listed: 80 and 443 only
    ],
)
def test_disallowed_urls_raise(url, allowed):
    with pytest.raises(CrawlError) as caught:
        check_url(url, allowed)
    assert caught.value.error_class is ErrorClass.DISALLOWED_URL


def test_internal_hosts_pass_only_when_listed_exactly():
    check_url("http://169.254.169.254/", ("169.254.169.254",))
    check_url("http://localhost:9000/", ("localhost:9000",))
    check_url("http://localhost:9001/", ("localhost:*",))


def test_redaction_keeps_host_and_path_only():
    url = "https://user:pw@upos.hdslb.com:8443/v/a.m4s?deadline=1&upsig=abc#frag"
    assert redact_url(url) == "https://upos.hdslb.com:8443/v/a.m4s"


def test_retry_after_reads_seconds_and_http_dates():
    assert parse_retry_after("120") == 120.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now=1445412480.0) == pytest.approx(30.0)
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now=1445412999.0) == 0.0  # already past
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def test_sessions_never_retry_on_their_own():
    with make_session(pool_size=8) as session:
        adapter = session.get_adapter("https://i0.hdslb.com/")
        assert adapter.max_retries.total == 0 and adapter.max_retries.read is False
        assert adapter._pool_maxsize == 8


# --- where a name resolves to ---------------------------------------------------------------

import socket  # noqa: E402 - the section's own imports

from media_crawler.download.fetcher import download_to_part  # noqa: E402
from media_crawler.download.request import DownloadPolicy, DownloadRequest  # noqa: E402
from media_crawler_tests.download.httpserver import Reply  # noqa: E402

JPEG = b"\xff\xd8\xff" + b"j" * 2000


@pytest.fixture
def rebinding_name(monkeypatch):
    """`media.example.test` resolves to 127.0.0.1, as a hostile DNS answer would make it."""
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        return real("127.0.0.1" if host == "media.example.test" else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    return "media.example.test"


def fetch(session, url, part, allowed):
    return download_to_part(session, DownloadRequest(url, part),
                            DownloadPolicy(max_bytes=10**6, url_policy=UrlPolicy.from_entries(allowed)))


def test_a_public_looking_name_that_resolves_internally_is_refused(server, session, part, rebinding_name):
    server.route("/a.jpg", Reply(JPEG, content_type="image/jpeg"))
    with pytest.raises(CrawlError) as caught:
        fetch(session, server.url("/a.jpg", host=rebinding_name), part, ("*",))
    assert caught.value.error_class is ErrorClass.DISALLOWED_URL and "internal address" in caught.value.message
    assert server.requests_to("/a.jpg") == [] and not part.exists()


def test_a_name_listed_exactly_may_resolve_internally(server, session, part, rebinding_name):
    server.route("/a.jpg", Reply(JPEG, content_type="image/jpeg"))
    assert fetch(session, server.url("/a.jpg", host=rebinding_name), part, (f"{rebinding_name}:*",)).size == len(JPEG)


def test_a_redirect_to_a_name_resolving_internally_is_refused(server, session, part, rebinding_name):
    target = server.route("/b.jpg", Reply(JPEG, content_type="image/jpeg"))
    start = server.route("/start", Reply(redirect_to=target.replace("127.0.0.1", rebinding_name)))
    with pytest.raises(CrawlError) as caught:
        fetch(session, start, part, ("127.0.0.1:*", "*"))
    assert caught.value.error_class is ErrorClass.DISALLOWED_URL
    assert server.requests_to("/b.jpg") == []


def test_a_kept_alive_connection_is_checked_again_for_the_next_allowlist(server, session, part, rebinding_name):
    url = server.route("/a.jpg", Reply(JPEG, content_type="image/jpeg")).replace("127.0.0.1", rebinding_name)
    fetch(session, url, part, (f"{rebinding_name}:*",))  # opens and keeps a connection to the name
    with pytest.raises(CrawlError) as caught:
        fetch(session, url, part.with_name("other.part"), ("*",))
    assert caught.value.error_class is ErrorClass.DISALLOWED_URL
    assert len(server.requests_to("/a.jpg")) == 1


def test_a_kept_alive_connection_stays_usable_under_another_policy_listing_its_name(server, session, part,
                                                                                  rebinding_name):
    # Each run builds its own policy object: a connection kept from the last run is judged
    # again by the new one, by its host name (listed here), not refused as a bare address.
    url = server.route("/a.jpg", Reply(JPEG, content_type="image/jpeg")).replace("127.0.0.1", rebinding_name)
    fetch(session, url, part, (f"{rebinding_name}:*",))
    assert fetch(session, url, part.with_name("other.part"), (f"{rebinding_name}:*",)).size == len(JPEG)
    assert len(server.requests_to("/a.jpg")) == 2


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:8799/small/s_00001.jpg", "https://cdn.example.org/a/b.jpg?sig=1#x", "http://h.example",
    "http://h.example:080/x", "http://h.example:0/x", "http://h.example:99999/x", "http://h.example:/x",
    "HTTP://H.Example/x", "http://u:p@h.example/x", "http://1:2@h.example/x", "http://[::1]:8080/x",
    "http://h.example/a b", "http://h.example/a\tb?c", "http://h.example/caf\u00e9", "http://h.example?q",
    "http://h.example#f", "http://h.example/a\\b", "http://h_x.example/", "ftp://h.example/x", " http://h.example/x",
])
def test_redaction_reads_a_url_as_urlsplit_does(url):
    """redact_url's quick reading of a plain URL says what its urlsplit reading says."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host, port = parts.hostname or "", f":{parts.port}" if parts.port else ""
    except ValueError:
        return  # not a plain URL: read by urlsplit itself
    host = f"[{host}]" if ":" in host else host
    assert redact_url(url) == f"{parts.scheme}://{host}{port}{parts.path or '/'}"

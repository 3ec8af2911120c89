"""media_crawler.http: the URL allowlist (internal hosts, wildcards, schemes), redaction, Retry-After, session retries."""
from __future__ import annotations

import pytest

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.http import check_url, make_session, parse_retry_after, redact_url

CDN = ("*.hdslb.com", "wx1.sinaimg.cn")


@pytest.mark.parametrize(
    "url, allowed",
    [
        ("https://upos-sz-mirrorali.bilivideo.hdslb.com/a.m4s?deadline=1", CDN),
        ("https://i0.hdslb.com/bfs/a.jpg", CDN),
        ("https://WX1.sinaimg.cn./large/a.jpg", CDN),  # case and a trailing dot do not matter
        ("http://127.0.0.1:8787/media/a.jpg", ("127.0.0.1",)),  # the simulator, listed explicitly
        ("http://[::1]:8787/a.jpg", ("::1",)),
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
    ],
)
def test_disallowed_urls_raise(url, allowed):
    with pytest.raises(CrawlError) as caught:
        check_url(url, allowed)
    assert caught.value.error_class is ErrorClass.DISALLOWED_URL


def test_internal_hosts_pass_only_when_listed_exactly():
    check_url("http://169.254.169.254/", ("169.254.169.254",))
    check_url("http://localhost:9000/", ("localhost",))


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

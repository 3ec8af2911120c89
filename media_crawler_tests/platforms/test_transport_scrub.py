"""Secret scrubbing (URLs and free text) and the requests transport, with a fake session: no network."""
from __future__ import annotations

import pytest
import requests

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.platforms.registry import build_adapter, names, specs
from media_crawler.platform_spec import PlatformSettings
from media_crawler.scrub import identity_url, scrub_text, scrub_url
from media_crawler.platforms.transport import RequestsTransport

FAKE_TOKEN = "EAAB-fake-token-1234567890"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://graph.facebook.com/v19.0/42/posts?access_token=abc&after=X&__paging_token=p",
         "https://graph.facebook.com/v19.0/42/posts?after=X&__paging_token=p"),
        ("https://api.bilibili.com/x/player/wbi/playurl?bvid=BV1&w_rid=ff&wts=1", "https://api.bilibili.com/x/player/wbi/playurl?bvid=BV1&wts=1"),
        ("https://upos.bilivideo.com/a.m4s?deadline=9&upsig=abc&uparams=e,deadline", "https://upos.bilivideo.com/a.m4s?deadline=9&uparams=e,deadline"),
        ("https://f.video.weibocdn.com/o0/x.mp4?label=mp4_hd&Expires=1&ssig=abc&KID=k", "https://f.video.weibocdn.com/o0/x.mp4?label=mp4_hd&Expires=1&KID=k"),
        # oe: Facebook declares it a signature parameter (PlatformSpec.signature_params)
        ("https://scontent.xx.fbcdn.net/v/a.jpg?_nc_cat=6&oh=00_ab&oe=65EF", "https://scontent.xx.fbcdn.net/v/a.jpg?_nc_cat=6"),
        ("https://cdn.test/a.jpg?w=1&auth_key=1-0-abc&signature=s&sig=g&Policy=p&Key-Pair-Id=k", "https://cdn.test/a.jpg?w=1"),
        ("https://user:pw@example.test/p?SESSDATA=s&sign=x&client_secret=y&X-Amz-Signature=z&keep=1", "https://example.test/p?keep=1"),
        ("https://example.test/plain", "https://example.test/plain"),
    ],
)
def test_scrub_url(url, expected):
    specs()  # the registry registers the platforms' signature parameters
    assert scrub_url(url) == expected


def test_scrub_text_masks_urls_pairs_and_known_values():
    text = f"GET https://graph.facebook.com/x?access_token={FAKE_TOKEN} failed; cookie SESSDATA=abcd1234; token {FAKE_TOKEN}"
    scrubbed = scrub_text(text, [FAKE_TOKEN, None, "ab"])
    assert FAKE_TOKEN not in scrubbed and "abcd1234" not in scrubbed
    assert scrubbed.startswith("GET https://graph.facebook.com/x failed")


class FakeSession(requests.Session):
    """requests' own request preparation, with `send` answering from the test."""

    def __init__(self, outcome):
        super().__init__()
        self.outcome = outcome
        self.calls = []

    def get_adapter(self, url):
        return self  # the fake is its own adapter: `send` answers

    def send(self, request, **kwargs):
        self.calls.append((request.url, kwargs.get("timeout")))
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


def fake_response(status=200, body=b'{"ok": 1}', headers=None, url="https://graph.facebook.com/x?access_token=" + FAKE_TOKEN):
    raw = requests.models.Response()
    raw.status_code, raw._content, raw.url = status, body, url
    raw._content_consumed = True  # the body is in hand: iter_content serves it
    raw.headers.update(headers or {"Content-Type": "application/json"})
    return raw


def test_transport_returns_scrubbed_responses_and_runs_hooks():
    seen = []
    session = FakeSession(fake_response(body='{"msg": "这里"}'.encode()))
    transport = RequestsTransport(session, connect_timeout=2, read_timeout=9,
                                  before_request=lambda p: seen.append(("before", p)),
                                  after_response=lambda p, r: seen.append(("after", p, r.headers["content-type"])))
    answer = transport.get("facebook", "https://graph.facebook.com/x", params={"access_token": FAKE_TOKEN})
    assert answer.status == 200 and answer.json() == {"msg": "这里"}  # UTF-8 even without a declared charset
    assert answer.url == "https://graph.facebook.com/x"
    assert session.calls[0] == (f"https://graph.facebook.com/x?access_token={FAKE_TOKEN}", (2, 9))
    assert seen == [("before", "facebook"), ("after", "facebook", "application/json")]


def test_http_errors_are_returned_not_raised():
    answer = RequestsTransport(FakeSession(fake_response(status=503, body=b"down"))).get("weibo", "https://m.weibo.cn/")
    assert answer.status == 503 and answer.text == "down"


@pytest.mark.parametrize(
    ("exc", "error_class"),
    [
        (requests.ConnectTimeout(f"timed out https://g/x?access_token={FAKE_TOKEN}"), ErrorClass.NETWORK_TIMEOUT),
        (requests.ReadTimeout("read timed out"), ErrorClass.NETWORK_TIMEOUT),
        (requests.ConnectionError(f"reset https://g/x?access_token={FAKE_TOKEN}"), ErrorClass.CONNECTION_RESET),
        (requests.exceptions.ChunkedEncodingError("broken"), ErrorClass.CONNECTION_RESET),
        (requests.ConnectionError(ConnectionRefusedError(111, "Connection refused")), ErrorClass.CONNECTION_REFUSED),
    ],
)
def test_network_failures_are_classified_and_scrubbed(exc, error_class):
    transport = RequestsTransport(FakeSession(exc))
    with pytest.raises(CrawlError) as caught:
        transport.get("facebook", "https://g/x", params={"access_token": FAKE_TOKEN})
    assert caught.value.error_class == error_class
    assert FAKE_TOKEN not in caught.value.message


def test_registry_builds_every_platform():
    assert set(names()) == {"bilibili", "weibo", "facebook", "urls"}
    for name in names():
        adapter = build_adapter(name, PlatformSettings(), RequestsTransport(FakeSession(fake_response())))
        assert adapter.name == name
    with pytest.raises(ValueError):
        build_adapter("myspace", PlatformSettings(), None)


@pytest.mark.parametrize(
    ("url", "identity"),
    [
        ("https://cdn.test/a.jpg?w=1&auth_key=1700000000-0-0-9f&signature=s", "https://cdn.test/a.jpg?w=1"),
        ("https://b.s3.test/k.mp4?X-Amz-Signature=ab&X-Amz-Credential=c&v=2", "https://b.s3.test/k.mp4?v=2"),
        ("https://d.cloudfront.test/v.mp4?Policy=p&Signature=s&Key-Pair-Id=k", "https://d.cloudfront.test/v.mp4"),
        ("https://cdn.test/a.jpg?sig=1&token=t#frag", "https://cdn.test/a.jpg#frag"),
        # kept as written, not re-encoded: an unsigned URL is the identity it always had
        ("https://cdn.test/a%2Cb.jpg?x=1%2C2&y", "https://cdn.test/a%2Cb.jpg?x=1%2C2&y"),
        ("http://[]", "http://[]"),
    ],
)
def test_identity_url_drops_signatures_only(url, identity):
    assert identity_url(url) == identity


def test_identity_url_drops_the_parameters_a_platform_declares():
    url = "https://video.xx.fbcdn.net/v/a.mp4?efg=e&_nc_ht=h&oh=00_AfB&oe=65EF1A2B"
    assert identity_url(url, ("oh", "oe")) == "https://video.xx.fbcdn.net/v/a.mp4?efg=e&_nc_ht=h"

"""The URL-list adapter: identity from sha256, kind guessing, dated and undated items, paging."""
from __future__ import annotations

import hashlib
from datetime import date

import pytest

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.models import DayWindow, ItemError, MediaRecord
from media_crawler.platforms.registry import parse_source
from media_crawler.platform_spec import PlatformSettings
from media_crawler.platforms.urls.client import UrlsAdapter
from media_crawler.platforms.urls.normalize import guess_kind, normalize_feed

from .fakes import FakeTransport, response

FEED = "http://127.0.0.1:9/urls/demo.json"
SHA = "a" * 64


def test_items_become_file_records_keyed_by_sha256():
    body = {"items": [
        {"url": "http://127.0.0.1:9/media/a.jpg", "sha256": SHA.upper(), "size": 10, "extra": [1]},
        {"url": "/media/b.mp4?token=secret1&x=1", "size": "20", "title": "clip"},
        {"url": "http://127.0.0.1:9/media/c.bin", "type": "audio/mpeg"},
    ]}
    a, b, c = normalize_feed(body, FEED)
    assert (a.item_id, a.variant, a.kind, a.expected_sha256, a.expected_size) == (SHA, "file", "image", SHA, 10)
    assert b.media_url == "http://127.0.0.1:9/media/b.mp4?token=secret1&x=1"
    # identity: the URL without its credential and signature parameters (scrub.identity_url)
    assert b.item_id == hashlib.sha256(b"http://127.0.0.1:9/media/b.mp4?x=1").hexdigest()
    assert b.canonical_url == "http://127.0.0.1:9/media/b.mp4?x=1"  # identity never carries a token
    assert (b.kind, b.expected_size, b.meta["title"]) == ("video", 20, "clip")
    assert c.kind == "audio" and c.published_at is None


def test_broken_items_fail_alone():
    items = normalize_feed({"items": [{"sha256": SHA}, {"url": "http://h/x.png", "sha256": "nothex"},
                                      "not an object", {"url": "http://h/ok.png"}]}, FEED)
    assert [type(i).__name__ for i in items] == ["ItemError", "ItemError", "ItemError", "MediaRecord"]
    assert {i.error_class for i in items if isinstance(i, ItemError)} == {"parse_error"}


@pytest.mark.parametrize(
    ("url", "declared", "kind"),
    [("http://h/a.JPG", None, "image"), ("http://h/a.webp", None, "image"), ("http://h/v.m4s", None, "video"),
     ("http://h/a.m4a", None, "audio"), ("http://h/a", "video", "video"), ("http://h/a", "image/png", "image"),
     ("http://h/noext", None, "image")],
)
def test_kind_guessing(url, declared, kind):
    assert guess_kind(url, declared) == kind


def test_window_dated_items_follow_their_day_and_undated_ones_every_day():
    feed = {"items": [
        {"url": "http://127.0.0.1:9/media/in.jpg", "published_at": "2026-11-26T10:00:00Z"},
        {"url": "http://127.0.0.1:9/media/out.jpg", "published_at": 1795000000},
        {"url": "http://127.0.0.1:9/media/undated.jpg"},
    ], "next": "page2.json"}
    transport = FakeTransport({"/urls/demo.json": feed, "/urls/page2.json": {"items": []}})
    adapter = UrlsAdapter(PlatformSettings(), transport)
    items = list(adapter.iter_records(parse_source("urls", FEED), DayWindow(date(2026, 11, 26))))
    assert [i.media_url.rsplit("/", 1)[1] for i in items] == ["in.jpg", "undated.jpg"]
    assert transport.paths() == ["/urls/demo.json", "/urls/page2.json"]


def test_feed_that_is_not_json_is_a_parse_error():
    transport = FakeTransport({"/urls/html.json": response(200, "<html>oops</html>")})
    with pytest.raises(CrawlError) as caught:
        list(UrlsAdapter(PlatformSettings(), transport).iter_records(
            parse_source("urls", "http://127.0.0.1:9/urls/html.json"), DayWindow(date(2026, 11, 26))))
    assert caught.value.error_class == ErrorClass.PARSE_ERROR


def test_records_are_media_records():
    assert all(isinstance(r, MediaRecord) for r in normalize_feed([{"url": "http://h/a.jpg"}], FEED))

"""The Bilibili adapter against a fake transport serving saved responses:
WBI signing on the wire, window paging, part fan-out, key refresh, re-resolution."""
from __future__ import annotations

import copy
import hashlib
from datetime import date

import pytest

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.models import DayWindow, ItemError, MediaRecord
from media_crawler.platforms.registry import parse_source
from media_crawler.platform_spec import PlatformSettings
from media_crawler.platforms.bilibili.client import BilibiliAdapter
from media_crawler.platforms.bilibili.wbi import mixin_key

from .fakes import FakeTransport, InTurn, load_fixture

SOURCE = parse_source("bilibili", "user 900408")
WINDOW = DayWindow(date(2025, 4, 22))  # the first upload's day; the second is 5 days older
NAV = load_fixture("bilibili", "nav_wbi_keys_not_logged_in.json")
MIXIN = mixin_key("bb08aae48437802fd5f9e3c36677d313", "1a8b8447a33cb68e40ac9ca2f14884e5")


class Cursors:
    def __init__(self):
        self.values = {}

    def get_cursor(self, source_key, name):
        return self.values.get((source_key, name))

    def set_cursor(self, source_key, name, value):
        self.values[(source_key, name)] = value


def arc_page(pn: int = 1) -> dict:
    body = load_fixture("bilibili", "space_wbi_arc_search_ok.json")
    body["data"]["page"]["pn"] = pn
    return body


def view_for(bvid: str) -> dict:
    body = load_fixture("bilibili", "view_ok.json")
    body["data"]["bvid"] = bvid
    return body


def routes(**overrides) -> dict:
    table = {
        "/x/web-interface/nav": NAV,
        "/x/space/wbi/arc/search": arc_page(),
        "/x/web-interface/view": lambda request: view_for(request.params["bvid"]),
        "/x/player/wbi/playurl": load_fixture("bilibili", "playurl_dash_fnval4048.json"),
    }
    table.update(overrides)
    return table


def adapter(transport, **settings) -> BilibiliAdapter:
    return BilibiliAdapter(PlatformSettings(api_base="http://127.0.0.1:9/bilibili", **settings), transport)


def verify_w_rid(params: dict) -> bool:
    """Recompute the signature the way the server does."""
    from urllib.parse import quote, urlencode

    unsigned = {k: v for k, v in params.items() if k != "w_rid"}
    query = urlencode(sorted(unsigned.items()), quote_via=quote)
    return hashlib.md5((query + MIXIN).encode()).hexdigest() == params["w_rid"]


def test_window_walk_yields_cover_and_selected_tracks_and_stops_at_older_page():
    transport = FakeTransport(routes())
    items = list(adapter(transport).iter_records(SOURCE, WINDOW))
    assert [(i.item_id, i.variant, i.kind) for i in items] == [
        ("BV1Hs6QqqHr6", "cover", "image"),
        ("BV1Hs6QqqHr6:656547014", "video-12-7", "video"),
        ("BV1Hs6QqqHr6:656547014", "audio-34786", "audio"),
    ]
    assert all(WINDOW.contains(i.published_at) for i in items)
    # One list page only (its oldest upload is before the window, though count says 786),
    # and no view/playurl for the upload outside the window.
    assert transport.paths().count("/bilibili/x/space/wbi/arc/search") == 1
    assert [r.params.get("bvid") for r in transport.sent if r.path.endswith("/view")] == ["BV1Hs6QqqHr6"]
    assert items[1].meta["author_name"] == "sample name 5" and items[1].meta["post_id"] == "BV1Hs6QqqHr6"


def test_signed_requests_carry_a_valid_w_rid_and_browser_headers(monkeypatch):
    monkeypatch.setenv("BILIBILI_SESSDATA", "fake-sessdata-value")
    transport = FakeTransport(routes())
    bili = adapter(transport)
    list(bili.iter_records(SOURCE, WINDOW))
    signed = [r for r in transport.sent if "/wbi/" in r.path]
    assert signed and all("wts" in r.params and verify_w_rid(r.params) for r in signed)
    arc = next(r for r in signed if r.path.endswith("arc/search"))
    assert (arc.params["mid"], arc.params["order"], arc.params["pn"]) == ("900408", "pubdate", "1")
    headers = transport.sent[0].headers
    assert headers["Referer"] == "https://www.bilibili.com/" and "Mozilla" in headers["User-Agent"]
    assert "SESSDATA=fake-sessdata-value" in headers["Cookie"]
    download = bili.download_headers(MediaRecord("bilibili", "x", "cover", "image", "c", "m"))
    assert download["Referer"] == "https://www.bilibili.com/" and "Cookie" not in download


def test_nav_is_fetched_once_per_walk():
    transport = FakeTransport(routes())
    list(adapter(transport).iter_records(SOURCE, WINDOW))
    assert transport.paths().count("/bilibili/x/web-interface/nav") == 1


def test_rejected_signature_refreshes_keys_and_retries_once():
    rejected = {"code": -403, "message": "访问权限不足", "ttl": 1}
    transport = FakeTransport(routes(**{"/x/space/wbi/arc/search": InTurn(rejected, arc_page())}))
    items = list(adapter(transport).iter_records(SOURCE, WINDOW))
    assert len(items) == 3
    assert transport.paths().count("/bilibili/x/web-interface/nav") == 2


def test_signature_rejected_twice_raises():
    rejected = {"code": -403, "message": "访问权限不足", "ttl": 1}
    transport = FakeTransport(routes(**{"/x/space/wbi/arc/search": rejected}))
    with pytest.raises(CrawlError) as caught:
        list(adapter(transport).iter_records(SOURCE, WINDOW))
    assert caught.value.platform_code == "-403"
    assert transport.paths().count("/bilibili/x/space/wbi/arc/search") == 2


def test_risk_control_on_the_list_stops_the_walk():
    transport = FakeTransport(routes(**{"/x/space/wbi/arc/search": load_fixture("bilibili", "error_-352_risk_control_v_voucher.json")}))
    with pytest.raises(CrawlError) as caught:
        list(adapter(transport).iter_records(SOURCE, WINDOW))
    assert caught.value.error_class == ErrorClass.RATE_LIMITED


def test_deleted_video_is_an_item_error_not_a_failed_walk():
    transport = FakeTransport(routes(**{"/x/web-interface/view": load_fixture("bilibili", "view_error_62002_invisible.json")}))
    items = list(adapter(transport).iter_records(SOURCE, WINDOW))
    assert isinstance(items[0], MediaRecord) and items[0].variant == "cover"
    assert isinstance(items[1], ItemError)
    assert (items[1].error_class, items[1].platform_code, items[1].item_id) == ("not_found", "62002", "BV1Hs6QqqHr6")


def test_view_without_pages_falls_back_to_pagelist_and_fetches_each_part():
    view = view_for("BV1Hs6QqqHr6")
    del view["data"]["pages"], view["data"]["cid"]
    transport = FakeTransport(routes(**{
        "/x/web-interface/view": view,
        "/x/player/pagelist": load_fixture("bilibili", "pagelist_multipage.json"),
        "/x/player/wbi/playurl": load_fixture("bilibili", "playurl_mp4_durl.json"),
    }))
    items = list(adapter(transport).iter_records(SOURCE, WINDOW))
    tracks = [i for i in items if i.variant != "cover"]
    assert [(t.item_id, t.variant) for t in tracks] == [
        ("BV1Hs6QqqHr6:14625380", "durl-64-1"), ("BV1Hs6QqqHr6:37400809", "durl-64-1"),
        ("BV1Hs6QqqHr6:15700345", "durl-64-1"), ("BV1Hs6QqqHr6:17331366", "durl-64-1"),
    ]
    assert tracks[3].canonical_url == "https://www.bilibili.com/video/BV1Hs6QqqHr6?p=4#durl-64-1"
    assert [r.params["cid"] for r in transport.sent if r.path.endswith("playurl")] == [
        "14625380", "37400809", "15700345", "17331366",
    ]


def test_next_page_is_read_while_the_window_is_not_reached():
    newer = arc_page()
    for entry in newer["data"]["list"]["vlist"]:
        entry["created"] += 30 * 86400  # page 1: both uploads a month after the window
    transport = FakeTransport(routes(**{"/x/space/wbi/arc/search": InTurn(newer, arc_page(2))}))
    items = list(adapter(transport).iter_records(SOURCE, WINDOW))
    assert [r.params["pn"] for r in transport.sent if r.path.endswith("arc/search")] == ["1", "2"]
    assert {i.item_id for i in items} == {"BV1Hs6QqqHr6", "BV1Hs6QqqHr6:656547014"}


def test_newest_cursor_is_stored():
    cursors = Cursors()
    list(adapter(FakeTransport(routes())).iter_records(SOURCE, WINDOW, cursors))
    assert cursors.values[(SOURCE.key, "newest")] == "2025-04-22T03:00:00Z"


def test_resolve_fetches_fresh_urls_for_the_same_variant():
    transport = FakeTransport(routes())
    bili = adapter(transport, options={"max_height": 720})
    video = next(i for i in bili.iter_records(SOURCE, WINDOW) if i.variant.startswith("video"))
    assert video.variant == "video-13-7"
    fresh_body = copy.deepcopy(load_fixture("bilibili", "playurl_dash_fnval4048.json"))
    for stream in fresh_body["data"]["dash"]["video"]:
        stream["baseUrl"] = stream["base_url"] = f"https://fresh.bilivideo.com/{stream['id']}-{stream['codecid']}.m4s"
    transport.routes["/x/player/wbi/playurl"] = fresh_body
    fresh = bili.resolve(video)
    assert fresh.media_url == "https://fresh.bilivideo.com/13-7.m4s"
    assert fresh.key == video.key and fresh.canonical_url == video.canonical_url
    assert bili.url_lifetime_for(video) == 7200 and bili.url_lifetime_for(
        MediaRecord("bilibili", "BV1", "cover", "image", "c", "m")) is None


def test_resolve_of_a_vanished_variant_is_not_found():
    transport = FakeTransport(routes(**{"/x/player/wbi/playurl": load_fixture("bilibili", "playurl_mp4_durl.json")}))
    record = MediaRecord("bilibili", "BV1:2", "video-12-7", "video", "c", "m", resolve_ref="playurl:BV1:2")
    with pytest.raises(CrawlError) as caught:
        adapter(transport).resolve(record)
    assert caught.value.error_class == ErrorClass.NOT_FOUND


def test_a_drifted_view_fails_its_video_only():
    view = view_for("BV1Hs6QqqHr6")
    view["data"] = {"title": "no bvid, no pages"}
    transport = FakeTransport(routes(**{"/x/web-interface/view": view}))
    items = list(adapter(transport).iter_records(SOURCE, WINDOW))
    assert isinstance(items[0], MediaRecord) and items[0].variant == "cover"
    assert isinstance(items[1], ItemError)
    assert (items[1].error_class, items[1].item_id) == ("parse_error", "BV1Hs6QqqHr6")


def test_nav_without_keys_is_a_parse_error():
    transport = FakeTransport(routes(**{"/x/web-interface/nav": {"code": 0, "data": {"isLogin": True}}}))
    with pytest.raises(CrawlError) as caught:
        list(adapter(transport).iter_records(SOURCE, WINDOW))
    assert caught.value.error_class == ErrorClass.PARSE_ERROR

"""Bilibili normalizers, DASH selection, WBI signing and error codes, on the saved responses."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from media_crawler.errors import ErrorClass
from media_crawler.models import ItemError, MediaRecord
from media_crawler.platforms.bilibili import normalize
from media_crawler.platforms.bilibili.errors import classify_envelope, decode_response
from media_crawler.platforms.bilibili.quality import parse_stream, select_audio, select_video
from media_crawler.platforms.bilibili.wbi import WbiKeyCache, keys_from_nav, mixin_key, signed_query

from .fakes import load_fixture, response

PART = normalize.VideoPart("BV1M4XzbUUzv", "656547014", 1, datetime(2020, 1, 30, 9, 40, 55, tzinfo=timezone.utc))


def playurl(name: str) -> dict:
    return load_fixture("bilibili", name)["data"]


def test_arc_search_yields_one_stable_cover_per_upload():
    items = normalize.covers_from_arc_search(load_fixture("bilibili", "space_wbi_arc_search_ok.json")["data"])
    assert [(r.item_id, r.variant, r.kind) for r in items] == [
        ("BV1Hs6QqqHr6", "cover", "image"), ("BV1EQyDPnEKA", "cover", "image"),
    ]
    first = items[0]
    assert first.media_url == "https://i0.hdslb.com/bfs/archive/c0ebbfd6b50af76eb36acc4455477d76ff21a012.jpg"
    assert first.canonical_url == "https://www.bilibili.com/video/BV1Hs6QqqHr6#cover"
    assert first.published_at == datetime(2025, 4, 22, 3, 0, tzinfo=timezone.utc)
    assert first.resolve_ref is None  # covers do not expire
    assert first.meta["author_id"] == "900408" and first.meta["title"] == "sample title 9"


def test_cover_resize_suffix_is_stripped():
    assert normalize.original_image_url("//i0.hdslb.com/bfs/archive/ab.jpg@320w_200h_1c.webp") == (
        "https://i0.hdslb.com/bfs/archive/ab.jpg"
    )
    # Not an image CDN host (the simulator): scheme left alone.
    assert normalize.original_image_url("http://127.0.0.1:1/media/a.jpg@100w") == "http://127.0.0.1:1/media/a.jpg"


def test_view_gives_parts_owner_and_pubdate():
    info = normalize.video_info_from_view(load_fixture("bilibili", "view_ok.json")["data"])
    assert info.bvid == "BV1M4XzbUUzv"
    assert [part.item_id for part in info.parts] == ["BV1M4XzbUUzv:656547014"]
    assert info.published_at == datetime.fromtimestamp(1580377255, timezone.utc)
    assert info.meta["author_name"] == "sample name 5" and info.meta["author_id"] == "48855462"
    assert info.parts[0].meta["width"] == 1920 and info.parts[0].page_url.endswith("?p=1")


def test_pagelist_lists_every_part_of_a_multipart_video():
    parts = normalize.parts_from_pages(load_fixture("bilibili", "pagelist_multipage.json")["data"], "BV1xx", None, {})
    assert [(p.cid, p.page) for p in parts] == [("14625380", 1), ("37400809", 2), ("15700345", 3), ("17331366", 4)]
    assert parts[3].meta["height"] == 720 and parts[3].meta["part"] == "sample part 4"


@pytest.mark.parametrize(
    ("max_height", "codec_order", "expected_video"),
    [
        (1080, ("avc", "hevc", "av1"), "video-12-7"),  # 1920x960, AVC preferred
        (1080, ("hevc", "avc"), "video-12-12"),
        (720, ("avc",), "video-13-7"),  # 1280x640
        (720, ("hevc", "avc"), "video-13-12"),
        (480, ("avc",), "video-90-7"),  # 854x426
        (360, ("avc",), "video-27-7"),  # 640x320
        (240, ("avc",), "video-27-7"),  # nothing fits: the smallest, not nothing
        (1080, ("av1",), "video-12-7"),  # no AV1 offered: the others, best bitrate first
    ],
)
def test_dash_selection_under_height_and_codec_limits(max_height, codec_order, expected_video):
    records = normalize.records_from_playurl(playurl("playurl_dash_fnval4048.json"), PART, max_height, codec_order)
    assert [(r.variant, r.kind) for r in records] == [(expected_video, "video"), ("audio-34786", "audio")]


def test_dash_tracks_carry_identity_backups_and_resolve_ref():
    video, audio = normalize.records_from_playurl(playurl("playurl_dash_fnval4048.json"), PART, 1080, ("avc",))
    assert video.item_id == audio.item_id == video.group == "BV1M4XzbUUzv:656547014"
    assert video.canonical_url == "https://www.bilibili.com/video/BV1M4XzbUUzv?p=1#video-12-7"
    assert video.resolve_ref == audio.resolve_ref == "playurl:BV1M4XzbUUzv:656547014"
    assert "143623477_nb3-1-30080.m4s" in video.media_url and len(video.backup_urls) == 2
    assert video.media_url not in video.backup_urls
    assert (video.meta["width"], video.meta["height"], video.meta["codec"]) == (1920, 960, "avc")
    assert "width" not in audio.meta and audio.meta["bandwidth"] == 154889
    assert video.published_at == PART.published_at


def test_audio_may_be_null():
    data = playurl("playurl_dash_fnval4048.json")
    data["dash"]["audio"] = None
    records = normalize.records_from_playurl(data, PART, 1080, ("avc",))
    assert [r.variant for r in records] == ["video-12-7"]


def test_legacy_durl_gives_one_record_per_segment():
    records = normalize.records_from_playurl(playurl("playurl_mp4_durl.json"), PART, 1080, ("avc",))
    assert [(r.item_id, r.variant, r.kind) for r in records] == [("BV1M4XzbUUzv:656547014", "durl-64-1", "video")]
    assert records[0].expected_size == 70486426 and len(records[0].backup_urls) == 2
    assert records[0].meta["duration"] == pytest.approx(283.801)


def test_stream_selection_helpers_directly():
    streams = [parse_stream(raw) for raw in playurl("playurl_dash_fnval4048.json")["dash"]["video"]]
    assert select_video([], 1080, ("avc",)) is None
    assert select_video(streams, 640, ("hevc",)).codecid == 12
    assert select_audio([]) is None
    assert parse_stream({"id": 80}) is None  # no URL: unusable, skipped


def test_wbi_vector_from_platform_notes():
    mixin = mixin_key("7cd084941338484aae1ad9425b84077c", "4932caff0ff746eab6f01bf08b70ac45")
    assert mixin == "ea1db124af3c7062474693fa704f4ff8"
    query = signed_query({"foo": "114", "bar": "514", "zab": 1919810}, mixin, wts=1702204169)
    assert query == "bar=514&foo=114&wts=1702204169&zab=1919810&w_rid=8f6f2b5b3d485fe1886cec6a0be8c5d4"


def test_wbi_drops_reserved_characters_and_encodes_spaces_as_percent20():
    query = signed_query({"keyword": "a b!'()*/"}, "0" * 32, wts=1)
    assert query.startswith("keyword=a%20b%2F&wts=1&w_rid=")


def test_nav_minus_101_still_carries_keys():
    body = load_fixture("bilibili", "nav_wbi_keys_not_logged_in.json")
    assert keys_from_nav(body) == ("bb08aae48437802fd5f9e3c36677d313", "1a8b8447a33cb68e40ac9ca2f14884e5")
    assert keys_from_nav({"code": -101, "data": {"isLogin": False}}) is None


def test_wbi_keys_are_cached_for_an_hour_and_refetched_after_invalidate():
    fetched, clock = [], [0.0]
    cache = WbiKeyCache(lambda: fetched.append(1) or ("a" * 32, "b" * 32), ttl_s=3600, clock=lambda: clock[0])
    cache.mixin(), cache.mixin()
    clock[0] = 3599
    cache.mixin()
    assert len(fetched) == 1
    clock[0] = 3600
    cache.mixin()
    cache.invalidate()
    cache.mixin()
    assert len(fetched) == 3


@pytest.mark.parametrize(
    ("name", "error_class", "code"),
    [
        ("error_-412_request_blocked.json", ErrorClass.RATE_LIMITED, "-412"),
        ("error_-352_risk_control_v_voucher.json", ErrorClass.RATE_LIMITED, "-352"),
        ("view_error_-404_deleted.json", ErrorClass.NOT_FOUND, "-404"),
        ("view_error_62002_invisible.json", ErrorClass.NOT_FOUND, "62002"),
        ("nav_wbi_keys_not_logged_in.json", ErrorClass.AUTH, "-101"),  # as an envelope; the adapter reads the keys
    ],
)
def test_error_fixtures_classify(name, error_class, code):
    error = classify_envelope(load_fixture("bilibili", name), "view")
    assert (error.error_class, error.platform_code) == (error_class, code)


@pytest.mark.parametrize(
    ("code", "error_class"),
    [(-799, ErrorClass.RATE_LIMITED), (-401, ErrorClass.RATE_LIMITED), (62004, ErrorClass.NOT_FOUND),
     (62012, ErrorClass.NOT_FOUND), (-403, ErrorClass.NOT_FOUND), (-10403, ErrorClass.NOT_FOUND),
     (-688, ErrorClass.NOT_FOUND), (-101, ErrorClass.AUTH), (-12345, ErrorClass.PARSE_ERROR)],
)
def test_other_documented_codes(code, error_class):
    assert classify_envelope({"code": code, "message": "x"}).error_class == error_class
    assert classify_envelope({"code": 0, "data": {}}) is None


def test_http_412_html_page_is_rate_limited_and_garbage_is_parse_error():
    blocked = response(412, "<html>The request was rejected</html>", {"Content-Type": "text/html"})
    with pytest.raises(Exception) as caught:
        decode_response(blocked, "arc/search")
    assert caught.value.error_class == ErrorClass.RATE_LIMITED and caught.value.platform_code == "-412"
    with pytest.raises(Exception) as caught:
        decode_response(response(200, "<html>not json</html>"), "arc/search")
    assert caught.value.error_class == ErrorClass.PARSE_ERROR and "not json" in caught.value.raw_body


def test_unknown_extra_fields_are_ignored_and_a_missing_url_fails_only_its_item():
    data = load_fixture("bilibili", "space_wbi_arc_search_ok.json")["data"]
    data["list"]["vlist"][0]["brand_new_field"] = {"nested": [1, 2]}
    del data["list"]["vlist"][1]["pic"]
    items = normalize.covers_from_arc_search(data)
    assert isinstance(items[0], MediaRecord) and items[0].item_id == "BV1Hs6QqqHr6"
    assert isinstance(items[1], ItemError)
    assert (items[1].error_class, items[1].item_id) == ("parse_error", "BV1EQyDPnEKA")


# -- identity and URLs of stream records ------------------------------------------------------

def test_an_ai_dubbed_audio_track_is_a_variant_of_its_own():
    original = normalize.records_from_playurl(playurl("playurl_dash_fnval4048.json"), PART, 1080, ("avc",))
    dubbed_data = {**playurl("playurl_dash_fnval4048.json"), "cur_language": "en"}
    dubbed = normalize.records_from_playurl(dubbed_data, PART, 1080, ("avc",))
    assert [r.variant for r in original] == ["video-12-7", "audio-34786"]
    assert [r.variant for r in dubbed] == ["video-12-7", "audio-34786-en"]  # the picture is the same file
    assert dubbed[1].canonical_url.endswith("#audio-34786-en") and dubbed[1].meta["language"] == "en"
    assert {r.key for r in original} & {r.key for r in dubbed} == {original[0].key}
    # Re-resolution looks the dubbed variant up in an answer of the same language.
    assert "audio-34786-en" in [r.variant for r in normalize.all_stream_records(dubbed_data, PART)]
    assert normalize.playurl_language({"cur_language": " zh-Hans/../"}) == "zh-Hans"
    assert normalize.playurl_language({"cur_language": ""}) is None and normalize.playurl_language({}) is None


def test_playurl_names_its_cid():
    assert normalize.playurl_cid(playurl("playurl_dash_fnval4048.json")) == "143623477"  # upgcxcode/65/46/143623477/
    assert normalize.playurl_cid(playurl("playurl_mp4_durl.json")) == "682610869"
    assert normalize.playurl_cid({"last_play_cid": 656547014, "dash": {}}) == "656547014"
    assert normalize.playurl_cid({"last_play_cid": 0, "dash": {"video": [{"baseUrl": "https://h/x.m4s"}]}}) is None


def test_stream_urls_on_the_video_cdn_are_fetched_over_https_like_covers():
    data = playurl("playurl_dash_fnval4048.json")
    http = [{**stream, "baseUrl": stream["baseUrl"].replace("https://", "http://"),
             "backupUrl": [url.replace("https://", "http://") for url in stream["backupUrl"]]}
            for stream in data["dash"]["video"]]
    video, _ = normalize.records_from_playurl({**data, "dash": {**data["dash"], "video": http}}, PART, 1080, ("avc",))
    assert video.media_url.startswith("https://xy113x200x108x47xy.mcdn.bilivideo.cn:4483/")
    assert all(url.startswith("https://upos-sz-mirror") for url in video.backup_urls)
    durl = playurl("playurl_mp4_durl.json")
    durl["durl"][0]["url"] = "http:" + durl["durl"][0]["url"][len("https:"):]
    [segment] = normalize.records_from_playurl(durl, PART, 1080, ("avc",))
    assert segment.media_url.startswith("https://upos-sz-mirrorcos.bilivideo.com/")
    # Protocol-relative and http URLs on other hosts (a simulator, a mirror) are left as served.
    assert normalize.stream_url("//upos-sz-mirrorcos.bilivideo.com/a.m4s") == "https://upos-sz-mirrorcos.bilivideo.com/a.m4s"
    assert normalize.stream_url("http://127.0.0.1:9/media/a.m4s") == "http://127.0.0.1:9/media/a.m4s"
    assert normalize.stream_url("http://evilbilivideo.com/a.m4s") == "http://evilbilivideo.com/a.m4s"


def test_hostile_numbers_in_a_playurl_never_reach_a_record():
    data = playurl("playurl_mp4_durl.json")
    data["durl"][0].update({"size": 2**64, "order": 10**30, "length": 1e308 * 10})
    [segment] = normalize.records_from_playurl(data, PART, 1080, ("avc",))
    assert segment.expected_size is None and segment.variant == "durl-64-1" and "duration" not in segment.meta
    data["durl"][0]["size"] = -5
    assert normalize.records_from_playurl(data, PART, 1080, ("avc",))[0].expected_size is None


def test_wbi_keys_must_be_32_characters():
    assert keys_from_nav({"data": {"wbi_img": {"img_url": "https://i0.h", "sub_url": "https://x/y.png"}}}) is None

"""Weibo normalizers on the saved responses: every picture, live photos, videos,
reposts under the original, tombstones, dates, URL canonicalization, errors."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.models import ItemError, MediaRecord
from media_crawler.platforms.weibo import normalize
from media_crawler.platforms.weibo.dates import parse_created_at
from media_crawler.platforms.weibo.errors import classify_body, decode_response
from media_crawler.platforms.weibo.images import canonical_image_url, unwrap_livephoto, upgrade_to_large

from .fakes import load_fixture, response

CHINA = timezone(timedelta(hours=8))
NOW_2019 = datetime(2019, 7, 15, 12, 0, tzinfo=CHINA)  # when getIndex_cards_page2 was saved


def records(items):
    return [item for item in items if isinstance(item, MediaRecord)]


def errors(items):
    return [item for item in items if isinstance(item, ItemError)]


def keys(items):
    return [(r.item_id, r.variant, r.kind) for r in records(items)]


def test_getindex_live_photo_video_and_tombstone():
    body = load_fixture("weibo", "getIndex_since_id_livephoto_video.json")
    items = normalize.normalize_mblogs(normalize.mblogs_from_getindex(body))
    assert keys(items) == [
        ("63885668ly1hn7livephoto01j20u0140q5k", "large", "image"),
        ("63885668ly1hn7livephoto01j20u0140q5k", "live", "video"),
        ("63885668ly1hn7plainpic02j20u0140abc", "large", "image"),
        ("0655:2120335063353190", "mp4_720p", "video"),
    ]
    image, clip, _, video = records(items)
    assert image.group == clip.group == "63885668ly1hn7livephoto01j20u0140q5k"
    assert image.canonical_url == "https://wx1.sinaimg.cn/large/63885668ly1hn7livephoto01j20u0140q5k.jpg"
    assert image.media_url == "https://wx1.sinaimg.cn/large/81957100ly1hn7livephoto01j20u0140q5k.jpg"
    assert image.resolve_ref is None and (image.meta["width"], image.meta["height"]) == (1080, 1440)
    assert clip.media_url == "https://livephoto.us.sinaimg.cn/000abcdEFgx08dExample0f0f455911961.mov"
    assert clip.resolve_ref == "show:mobile:9018104780787212"
    assert image.published_at == datetime(2024, 3, 2, 10, 21, 7, tzinfo=timezone.utc)
    assert image.meta["post_url"] == "https://weibo.com/8288667561/OabCdEfGh"
    assert image.meta["author_name"] == "sample screen_name 3"
    assert "EXAMPLE72001.mp4" in video.media_url and video.resolve_ref == "show:mobile:9417953193324097"
    assert video.canonical_url == "https://video.weibo.com/show?fid=0655:2120335063353190#mp4_720p"
    assert video.meta["duration"] == 62.5
    [tombstone] = errors(items)
    assert (tombstone.error_class, tombstone.item_id) == ("not_found", "1866350446938441")
    assert normalize.getindex_next_params(body) == {"since_id": "1902434594270375"}


def test_getindex_page2_every_picture_every_video_and_repost_under_original():
    body = load_fixture("weibo", "getIndex_cards_page2.json")
    items = normalize.normalize_mblogs(normalize.mblogs_from_getindex(body), now=NOW_2019)
    assert not errors(items)
    found = records(items)
    assert len(found) == 22
    reposted = found[:9]  # the pinned repost: the original's 9 pictures, 4 of them gifs
    assert [r.variant for r in reposted].count("gif") == 4 and [r.variant for r in reposted].count("large") == 5
    assert {r.meta["post_id"] for r in reposted} == {"6309120860950795"}
    assert {r.meta["post_url"] for r in reposted} == {"https://weibo.com/4184153540/HATt6nVb4"}
    assert {r.meta["via_post_id"] for r in reposted} == {"1929065717991980"}
    assert reposted[4].canonical_url == "https://wx1.sinaimg.cn/large/006WBHSjgy1g4g3k3f4q6g308q076hdt.gif"
    videos = [r for r in found if r.kind == "video"]
    assert len(videos) == 9 and {r.variant for r in videos} == {"mp4_720p"}
    assert videos[0].item_id == "2208:3989525281584204"
    assert videos[0].published_at == datetime(2019, 7, 14, 13, 0, tzinfo=timezone.utc)  # "15小时前"
    long_post = [r for r in found if r.meta.get("post_id") == "3226658309804827"]
    assert [r.item_id for r in long_post] == [
        "0062f5uBgy1g4x4gpkl73j30ku112wii", "0062f5uBgy1g4x4g3rwb3j30ku112ju7",
        "0062f5uBgy1g4x4gn7lelj30u0445x0d", "0062f5uBgy1g4x4gpdnduj30q548save",
    ]
    assert normalize.getindex_next_params(body) == {"page": "3"}  # this layout pages by number


def test_ajax_feed_statuses_pictures_gif_and_repost():
    items = normalize.normalize_mblogs(normalize.mblogs_from_ajax(load_fixture("weibo", "ajax_feed_statuses.json")), api="ajax")
    assert keys(items) == [
        ("4754409cly1h0jleiy7jlj20cj0b0my8", "large", "image"),
        ("d7562ea8gy1h0ju65not6g209q05qqud", "gif", "image"),
        ("0066h7fFgy1h0jtsfs1ujj30u027vtft", "large", "image"),
    ]
    reposted, gif, _ = records(items)
    assert reposted.meta["post_id"] == "4661964111198715" and reposted.meta["via_post_id"] == "7372004963703185"
    assert reposted.media_url == "https://wx4.sinaimg.cn/large/2585844cly1h0jleiy7jlj20cj0b0my8.jpg"
    assert gif.media_url.endswith("/large/d7562ea8gy1h0ju65not6g209q05qqud.gif")
    assert reposted.published_at == datetime(2022, 3, 23, 7, 25, 35, tzinfo=timezone.utc)  # when it was reposted


def test_ajax_mymblog_live_photo():
    items = normalize.normalize_mblogs(normalize.mblogs_from_ajax(load_fixture("weibo", "ajax_statuses_mymblog.json")), api="ajax")
    assert keys(items) == [
        ("3e3cd28cgy1gnx4eqia3sj20930budfw", "large", "image"),
        ("3e3cd28cgy1gnx4eqia3sj20930budfw", "live", "video"),
    ]
    image, clip = records(items)
    assert image.media_url == "https://wx4.sinaimg.cn/large/3e3cd28cgy1gnx4eqia3sj20930budfw.jpg"
    assert clip.media_url.startswith("https://livephoto.us.sinaimg.cn/000EXAMPLElivephoto.mov")
    assert clip.resolve_ref == "show:ajax:4549984945676721"
    assert image.meta["post_url"] == "https://weibo.com/1191098215/K3fnuEfZK"


@pytest.mark.parametrize(
    ("max_height", "variant", "file_part", "height"),
    [(1080, "mp4_720p", "EXAMPLE720.mp4", 1280), (480, "mp4_hd", "EXAMPLEhd.mp4", 960), (360, "mp4_ld", "EXAMPLEld.mp4", None)],
)
def test_ajax_show_playback_list_quality_under_height_limit(max_height, variant, file_part, height):
    mblog = normalize.mblog_from_show(load_fixture("weibo", "ajax_statuses_show_video_playback_list.json"))
    [video] = normalize.normalize_mblog(mblog, max_height=max_height, api="ajax")
    assert (video.item_id, video.variant, video.kind) == ("7342:5547305519611928", variant, "video")
    assert file_part in video.media_url and video.meta.get("height") == height
    assert video.meta["title"] == "婧仪的相册集" and video.meta["text"] == "sample text_raw 2"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Wed Mar 23 15:10:31 +0800 2022", datetime(2022, 3, 23, 7, 10, 31, tzinfo=timezone.utc)),
        ("刚刚", datetime(2019, 7, 15, 4, 0, tzinfo=timezone.utc)),
        ("5分钟前", datetime(2019, 7, 15, 3, 55, tzinfo=timezone.utc)),
        ("15小时前", datetime(2019, 7, 14, 13, 0, tzinfo=timezone.utc)),
        ("昨天 12:00", datetime(2019, 7, 14, 4, 0, tzinfo=timezone.utc)),
        ("07-14", datetime(2019, 7, 14, 4, 0, tzinfo=timezone.utc)),  # date only: noon China time
        ("12-30", datetime(2018, 12, 30, 4, 0, tzinfo=timezone.utc)),  # a future day is last year's
        ("2023-07-14", datetime(2023, 7, 14, 4, 0, tzinfo=timezone.utc)),
        ("whenever", None),
        (None, None),
    ],
)
def test_created_at_forms(text, expected):
    assert parse_created_at(text, NOW_2019) == expected


def test_image_url_canonicalization():
    served = "https://ww3.sinaimg.cn/orj360/006WBHSjgy1g4g3djs0ovj30k91b8e67.jpg"
    assert upgrade_to_large(served) == "https://ww3.sinaimg.cn/large/006WBHSjgy1g4g3djs0ovj30k91b8e67.jpg"
    assert upgrade_to_large("https://tvax2.sinaimg.cn/mw690/abc.gif") == "https://tvax2.sinaimg.cn/large/abc.gif"
    assert upgrade_to_large("http://127.0.0.1:8/media/orj360/a.jpg") == "http://127.0.0.1:8/media/orj360/a.jpg"
    assert canonical_image_url("abc", "https://ww4.sinaimg.cn/bmiddle/x.gif") == "https://wx1.sinaimg.cn/large/abc.gif"
    assert unwrap_livephoto("https://video.weibo.com/media/play?livephoto=https%3A%2F%2Fa.us.sinaimg.cn%2Fb.mov") == (
        "https://a.us.sinaimg.cn/b.mov"
    )


def test_missing_picture_url_fails_only_that_picture():
    mblog = load_fixture("weibo", "getIndex_since_id_livephoto_video.json")["data"]["cards"][0]["mblog"]
    del mblog["pics"][1]["large"], mblog["pics"][1]["url"]
    mblog["pics"][0]["new_field_from_the_future"] = {"x": 1}
    items = normalize.normalize_mblog(mblog)
    assert [r.variant for r in records(items)] == ["large", "live"]
    [error] = errors(items)
    assert (error.error_class, error.item_id) == ("parse_error", "63885668ly1hn7plainpic02j20u0140abc")


def test_post_without_id_is_a_parse_error():
    [error] = normalize.normalize_mblog({"created_at": "刚刚", "pics": []})
    assert error.error_class == "parse_error"


def test_ok0_no_content_is_end_of_list_not_a_ban():
    assert classify_body(load_fixture("weibo", "getIndex_error_ok0_no_content.json")) == "end"
    assert classify_body(load_fixture("weibo", "getIndex_since_id_livephoto_video.json")) == "ok"


@pytest.mark.parametrize(
    ("body", "error_class"),
    [
        (load_fixture("weibo", "error_ok-100_login_required.json"), ErrorClass.AUTH),
        ({"ok": 0, "msg": "请求过于频繁"}, ErrorClass.RATE_LIMITED),
        ({"ok": 0, "msg": "该微博不存在", "errno": "20101"}, ErrorClass.NOT_FOUND),
        ({"ok": 0, "msg": "something new"}, ErrorClass.PARSE_ERROR),
        (["not", "an", "object"], ErrorClass.PARSE_ERROR),
    ],
)
def test_error_bodies(body, error_class):
    with pytest.raises(CrawlError) as caught:
        classify_body(body)
    assert caught.value.error_class == error_class


@pytest.mark.parametrize(
    ("status", "error_class"),
    [(418, ErrorClass.RATE_LIMITED), (432, ErrorClass.RATE_LIMITED), (403, ErrorClass.AUTH),
     (429, ErrorClass.RATE_LIMITED), (502, ErrorClass.HTTP_5XX)],
)
def test_http_statuses(status, error_class):
    with pytest.raises(CrawlError) as caught:
        decode_response(response(status, "<html>blocked</html>"))
    assert caught.value.error_class == error_class


def test_video_title_is_media_info_titles_not_the_generic_page_title():
    items = normalize.normalize_mblogs(
        normalize.mblogs_from_getindex(load_fixture("weibo", "getIndex_cards_page2.json")), NOW_2019)
    titles = [r.meta.get("title") for r in records(items) if r.kind == "video"]
    assert titles[:3] == ["sample title 25", "sample title 31", "sample title 36"]  # not "sample page_title 18"
    from media_crawler.platforms.weibo.video import video_title

    info = {"titles": [{"title": "first"}, {"default": True, "title": "the default"}], "name": "post text"}
    assert video_title({"page_title": "generic"}, info) == "the default"
    assert video_title({"page_title": "generic"}, {"titles": [{"title": ""}], "name": "post text"}) == "generic"
    assert video_title({}, {"video_title": "own", "titles": "not a list"}) == "own"


def test_video_and_live_clip_urls_on_weibo_cdns_are_upgraded_to_https():
    items = normalize.normalize_mblogs(
        normalize.mblogs_from_getindex(load_fixture("weibo", "getIndex_cards_page2.json")), NOW_2019)
    videos = [r for r in records(items) if r.kind == "video"]
    assert videos and all(r.media_url.startswith("https://f.us.sinaimg.cn/") for r in videos)  # served as http://
    from media_crawler.platforms.weibo.posts import media_url

    assert media_url("http://f.video.weibocdn.com/o0/a.mp4?Expires=1") == "https://f.video.weibocdn.com/o0/a.mp4?Expires=1"
    assert media_url("http://livephoto.us.sinaimg.cn/a.mov") == "https://livephoto.us.sinaimg.cn/a.mov"
    assert media_url("http://127.0.0.1:9/media/a.mp4") == "http://127.0.0.1:9/media/a.mp4"  # a simulator stays http


@pytest.mark.parametrize("text", ["Mon Jan 01 00:30:00 +0800 0001", "99999999999天前", "9" * 80, "昨天 99:99"])
def test_created_at_off_the_calendar_is_no_date(text):
    assert parse_created_at(text, NOW_2019) is None

"""The Weibo adapter against a fake transport: both APIs, window paging
(pinned posts aside), detail fetches for abridged posts, errors, re-resolution."""
from __future__ import annotations

import copy
from datetime import date, datetime, timedelta, timezone

import pytest

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.models import DayWindow, ItemError, MediaRecord, Source
from media_crawler.platforms.registry import parse_source
from media_crawler.platform_spec import PlatformSettings
from media_crawler.platforms.weibo.client import WeiboAdapter

from .fakes import FakeTransport, InTurn, load_fixture, response

CHINA = timezone(timedelta(hours=8))
MOBILE = parse_source("weibo", "user 1669879400")
AJAX = parse_source("weibo", "user 1191098215", {"api": "ajax"})
END = load_fixture("weibo", "getIndex_error_ok0_no_content.json")


def adapter(transport, now=None, **settings) -> WeiboAdapter:
    settings = PlatformSettings(
        api_base="http://127.0.0.1:9/weibo-m", extra_api_bases={"ajax": "http://127.0.0.1:9/weibo"}, **settings
    )
    return WeiboAdapter(settings, transport, now=(lambda: now) if now else None)


def keys(items):
    return [(i.item_id, i.variant) if isinstance(i, MediaRecord) else ("error", i.error_class, i.item_id) for i in items]


def test_mobile_window_stops_at_the_first_page_reaching_past_it():
    transport = FakeTransport({"/api/container/getIndex": load_fixture("weibo", "getIndex_since_id_livephoto_video.json")})
    items = list(adapter(transport).iter_records(MOBILE, DayWindow(date(2024, 3, 2))))
    assert keys(items) == [
        ("63885668ly1hn7livephoto01j20u0140q5k", "large"),
        ("63885668ly1hn7livephoto01j20u0140q5k", "live"),
        ("63885668ly1hn7plainpic02j20u0140abc", "large"),
    ]
    [request] = transport.sent
    assert request.params == {"type": "uid", "value": "1669879400", "containerid": "1076031669879400"}
    assert request.headers["Referer"] == "https://m.weibo.cn/"


def test_mobile_pages_on_with_since_id_until_ok0():
    transport = FakeTransport({"/api/container/getIndex": InTurn(
        load_fixture("weibo", "getIndex_since_id_livephoto_video.json"), END)})
    items = list(adapter(transport).iter_records(MOBILE, DayWindow(date(2024, 2, 29))))
    assert keys(items) == [("error", "not_found", "1866350446938441")]  # the deleted original
    assert [r.params.get("since_id") for r in transport.sent] == [None, "1902434594270375"]


def test_pinned_old_post_does_not_end_the_walk():
    page = load_fixture("weibo", "getIndex_cards_page2.json")
    page["data"]["cards"] = page["data"]["cards"][:4]  # pinned (06-27) + three posts of 07-14
    transport = FakeTransport({"/api/container/getIndex": InTurn(page, END)})
    now = datetime(2019, 7, 15, 12, 0, tzinfo=CHINA)
    items = list(adapter(transport, now=now).iter_records(MOBILE, DayWindow(date(2019, 7, 14))))
    assert [i.item_id for i in items] == ["2208:3989525281584204", "6212:3501963444242411", "6915:3193315251512253"]
    assert [r.params.get("page") for r in transport.sent] == [None, "3"]


def test_long_post_is_completed_from_the_detail():
    page = load_fixture("weibo", "getIndex_cards_page2.json")
    long_post = copy.deepcopy(page["data"]["cards"][5]["mblog"])
    long_post["created_at"] = "Fri Jul 12 10:00:00 +0800 2019"
    extra = copy.deepcopy(long_post["pics"][0])
    long_post["pics"] += [{**extra, "pid": f"extra{n}"} for n in range(8)]  # 12 pictures in all
    long_post["pic_num"] = 12
    transport = FakeTransport({
        "/api/container/getIndex": page,
        "/statuses/show": lambda request: {"ok": 1, "data": long_post} if request.params["id"] == "3226658309804827" else END,
    })
    now = datetime(2019, 7, 15, 12, 0, tzinfo=CHINA)
    items = list(adapter(transport, now=now).iter_records(MOBILE, DayWindow(date(2019, 7, 12))))
    assert len(items) == 12 and all(i.meta["post_id"] == "3226658309804827" for i in items)
    assert [r.params["id"] for r in transport.sent if r.path.endswith("/statuses/show")] == ["3226658309804827"]


def test_ajax_api_pages_by_number_with_since_id():
    empty = {"ok": 1, "data": {"since_id": "", "list": []}}
    transport = FakeTransport({"/ajax/statuses/mymblog": InTurn(load_fixture("weibo", "ajax_statuses_mymblog.json"), empty)})
    items = list(adapter(transport).iter_records(AJAX, DayWindow(date(2021, 2, 23))))
    assert keys(items) == [("3e3cd28cgy1gnx4eqia3sj20930budfw", "large"), ("3e3cd28cgy1gnx4eqia3sj20930budfw", "live")]
    assert [(r.params["page"], r.params.get("since_id")) for r in transport.sent] == [
        ("1", None), ("2", "6206508040361525gd5"),
    ]
    assert all(r.url.startswith("http://127.0.0.1:9/weibo/ajax/") for r in transport.sent)
    assert transport.sent[0].headers["Referer"] == "https://weibo.com/"


def test_ajax_more_than_nine_pictures_and_long_text_fetch_show_and_longtext(monkeypatch):
    monkeypatch.setenv("WEIBO_COOKIE", "SUB=fake-cookie")
    feed = load_fixture("weibo", "ajax_statuses_mymblog.json")
    post = feed["data"]["list"][0]
    post["pic_num"], post["isLongText"] = 12, True
    full = copy.deepcopy(post)
    info = full["pic_infos"].pop("3e3cd28cgy1gnx4eqia3sj20930budfw")
    info["type"], full["pic_ids"], full["pic_infos"] = "pic", [], {}
    for n in range(12):
        full["pic_ids"].append(f"p{n}")
        full["pic_infos"][f"p{n}"] = {**info, "pic_id": f"p{n}"}
    transport = FakeTransport({
        "/ajax/statuses/mymblog": InTurn(feed, {"ok": 1, "data": {"list": []}}),
        "/ajax/statuses/show": {"ok": 1, **full},
        "/ajax/statuses/longtext": {"ok": 1, "data": {"longTextContent": "the whole long text"}},
    })
    items = list(adapter(transport).iter_records(AJAX, DayWindow(date(2021, 2, 23))))
    assert [i.item_id for i in items] == [f"p{n}" for n in range(12)]
    assert items[0].meta["text"] == "the whole long text"
    assert transport.sent[0].headers["Cookie"] == "SUB=fake-cookie"


def test_deleted_post_detail_is_an_item_error():
    feed = load_fixture("weibo", "ajax_statuses_mymblog.json")
    feed["data"]["list"][0]["pic_num"] = 12
    transport = FakeTransport({
        "/ajax/statuses/mymblog": InTurn(feed, {"ok": 1, "data": {"list": []}}),
        "/ajax/statuses/show": {"ok": 0, "msg": "该微博不存在", "errno": "20101"},
    })
    items = list(adapter(transport).iter_records(AJAX, DayWindow(date(2021, 2, 23))))
    assert keys(items) == [("error", "not_found", "4549984945676721")]


@pytest.mark.parametrize(
    ("answer", "error_class"),
    [
        (load_fixture("weibo", "error_ok-100_login_required.json"), ErrorClass.AUTH),
        (response(418, "I'm a teapot"), ErrorClass.RATE_LIMITED),
        (response(432, ""), ErrorClass.RATE_LIMITED),
        (response(403, "<html>forbidden</html>"), ErrorClass.AUTH),
        (response(200, "<html>visitor system</html>", url="https://passport.weibo.com/visitor/visitor"), ErrorClass.AUTH),
    ],
)
def test_walls_and_throttles_stop_the_walk(answer, error_class):
    transport = FakeTransport({"/api/container/getIndex": answer})
    with pytest.raises(CrawlError) as caught:
        list(adapter(transport).iter_records(MOBILE, DayWindow(date(2024, 3, 2))))
    assert caught.value.error_class == error_class


def test_unknown_api_option_is_rejected():
    with pytest.raises(ValueError, match="api must be one of mobile, ajax, not 'web'"):
        parse_source("weibo", "user 1", {"api": "web"})  # as sources.yaml reads it
    with pytest.raises(CrawlError):  # a Source built in code
        list(adapter(FakeTransport()).iter_records(Source("weibo", "user", "1", {"api": "web"}, key="weibo-1"), DayWindow(date(2024, 1, 1))))


def test_resolve_refreshes_a_live_clip_from_the_post_and_pictures_need_none():
    transport = FakeTransport({"/ajax/statuses/mymblog": InTurn(
        load_fixture("weibo", "ajax_statuses_mymblog.json"), {"ok": 1, "data": {"list": []}})})
    weibo = adapter(transport)
    image, clip = weibo.iter_records(AJAX, DayWindow(date(2021, 2, 23)))
    fresh_post = copy.deepcopy(load_fixture("weibo", "ajax_statuses_mymblog.json")["data"]["list"][0])
    fresh_post["pic_infos"]["3e3cd28cgy1gnx4eqia3sj20930budfw"]["video"] = "https://livephoto.us.sinaimg.cn/fresh.mov?Expires=9"
    transport.routes["/ajax/statuses/show"] = {"ok": 1, **fresh_post}
    assert weibo.resolve(clip).media_url == "https://livephoto.us.sinaimg.cn/fresh.mov?Expires=9"
    assert weibo.resolve(image) is image
    assert weibo.url_lifetime_for(clip) == 3600 and weibo.url_lifetime_for(image) is None
    assert weibo.download_headers(image)["Referer"] == "https://weibo.com/"
    assert transport.sent[-1].params == {"id": "4549984945676721"}


def test_items_outside_the_window_do_not_cost_detail_fetches():
    transport = FakeTransport({"/api/container/getIndex": load_fixture("weibo", "getIndex_cards_page2.json")})
    now = datetime(2019, 7, 15, 12, 0, tzinfo=CHINA)
    items = list(adapter(transport, now=now).iter_records(MOBILE, DayWindow(date(2019, 7, 14))))
    assert len(items) == 3 and not any(isinstance(i, ItemError) for i in items)
    assert transport.paths() == ["/weibo-m/api/container/getIndex"]  # the long post (07-12) was not fetched

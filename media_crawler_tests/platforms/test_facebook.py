"""Facebook: Graph API normalizers and error codes on the saved responses, usage
headers, and the adapter's paging (token from env only, never leaked) and re-resolution."""
from __future__ import annotations

import json
from datetime import date, datetime, timezone

import pytest

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.models import DayWindow, ItemError, MediaRecord
from media_crawler.platforms.registry import parse_source
from media_crawler.platform_spec import PlatformSettings
from media_crawler.platforms.facebook import normalize
from media_crawler.platforms.facebook.client import FacebookAdapter
from media_crawler.platforms.facebook.errors import classify_error, decode_response
from media_crawler.platforms.facebook.usage import suggested_delay, usage_from_headers

from .fakes import FakeTransport, InTurn, load_fixture, response

FAKE_TOKEN = "EAAB-fake-token-1234567890"
API = "http://127.0.0.1:9/facebook/v19.0"
PAGE = parse_source("facebook", "page 528144077089525")
WINDOW = DayWindow(date(2024, 3, 1))


@pytest.fixture(autouse=True)
def token(monkeypatch):
    monkeypatch.setenv("FB_ACCESS_TOKEN", FAKE_TOKEN)


def adapter(transport) -> FacebookAdapter:
    return FacebookAdapter(PlatformSettings(api_base=API), transport)


def test_posts_page_video_and_photo_attachments():
    items = []
    for post in load_fixture("facebook", "page_posts_attachments_video_photo.json")["data"]:
        items += normalize.normalize_post(post)
    assert [(r.item_id, r.variant, r.kind) for r in items] == [
        ("1885259812583763", "source", "video"), ("4478049458999119", "image", "image"),
    ]
    video, photo = items
    assert video.canonical_url == "https://www.facebook.com/528144077089525/videos/e06e13f618446980/"
    assert video.resolve_ref == "video:1885259812583763" and video.media_url.startswith("https://video.xx.fbcdn.net/")
    assert video.published_at == datetime(2024, 3, 1, 12, 0, tzinfo=timezone.utc)
    assert video.meta["post_id"] == "568848472421323_6336370013444574" and video.meta["text"] == "Watch our new clip"
    assert photo.resolve_ref == "post:861347015253552_2225151669332059"
    assert (photo.meta["width"], photo.meta["height"]) == (720, 720)


def test_album_yields_every_sub_attachment():
    items = normalize.normalize_post(load_fixture("facebook", "post_attachments_album_subattachments.json"))
    assert [r.item_id for r in items] == [
        "3855060506518813", "1509223107682447", "6989824653277681", "4712776753510738",
        "1251252435791267", "1264007585143660", "2961525675243390",
    ]
    assert {r.variant for r in items} == {"image"} and {r.kind for r in items} == {"image"}
    assert items[0].canonical_url.endswith("/photos/a.726729752927560/0ee7197cedbf251d/?type=3")
    assert {r.meta["post_id"] for r in items} == {"719437000106371_4444025645410541"}


def test_text_only_posts_yield_nothing():
    for post in load_fixture("facebook", "page_posts_paging_p1.json")["data"]:
        assert normalize.normalize_post(post) == []


def test_video_nodes():
    [video] = normalize.normalize_video_node(load_fixture("facebook", "video_source_by_id.json"))
    assert (video.item_id, video.variant, video.kind) == ("1885259812583763", "source", "video")
    assert video.meta["duration"] == 12.891 and video.resolve_ref == "video:1885259812583763"
    # Fetched without `source` (the /videos edge, or fields=... without it): no media URL, per-item parse_error.
    [missing] = normalize.normalize_video_node(load_fixture("facebook", "video_object_fields.json"))
    assert (missing.error_class, missing.item_id) == ("parse_error", "9420707890600646")
    edge = load_fixture("facebook", "page_videos_p1.json")["data"]
    assert [e.item_id for node in edge for e in normalize.normalize_video_node(node)] == [
        "1829641627435282", "9420707890600646", "323911791541183",
    ]


def test_missing_ids_fall_back_and_missing_urls_fail_only_their_item():
    post = load_fixture("facebook", "post_attachments_album_subattachments.json")
    subs = post["attachments"]["data"][0]["subattachments"]["data"]
    del subs[0]["target"]
    del subs[1]["media"]["image"]["src"]
    subs[2]["unheard_of"] = True
    items = normalize.normalize_post(post)
    assert items[0].item_id == "719437000106371_4444025645410541:1"
    assert isinstance(items[1], ItemError) and items[1].item_id == "1509223107682447"
    assert len([i for i in items if isinstance(i, MediaRecord)]) == 6


@pytest.mark.parametrize(
    ("name", "error_class", "code"),
    [
        ("error_100_33_object_not_found_deleted_or_private.json", ErrorClass.NOT_FOUND, "100/33"),
        # A 100 naming the permission, feature or token the call needs: fix the credential (PLATFORMS.md).
        ("error_100_missing_permission.json", ErrorClass.AUTH, "100"),
        ("error_100_pages_public_content_access.json", ErrorClass.AUTH, "100"),
        ("error_190_463_session_expired.json", ErrorClass.AUTH, "190/463"),
        ("error_190_token_expired_docs_template.json", ErrorClass.AUTH, "190/460"),
        ("error_80001_page_buc_rate_limit.json", ErrorClass.RATE_LIMITED, "80001"),
    ],
)
def test_error_fixtures(name, error_class, code):
    error = classify_error(load_fixture("facebook", name))
    assert (error.error_class, error.platform_code) == (error_class, code)


def test_throttle_examples_and_the_recorded_32():
    classes = [(classify_error(body).error_class, classify_error(body).platform_code)
               for body in load_fixture("facebook", "errors_throttle_codes_4_17_613.json")]
    assert classes == [(ErrorClass.RATE_LIMITED, "4"), (ErrorClass.RATE_LIMITED, "17/2446079"),
                       (ErrorClass.RATE_LIMITED, "613"), (ErrorClass.RATE_LIMITED, "368")]
    recorded = load_fixture("facebook", "error_32_page_request_limit_with_headers.json")
    answer = response(recorded["status"], json.dumps(recorded["json"]), recorded["headers"])
    with pytest.raises(CrawlError) as caught:
        decode_response(answer)
    assert (caught.value.error_class, caught.value.platform_code, caught.value.http_status) == (ErrorClass.RATE_LIMITED, "32", 400)


@pytest.mark.parametrize(
    ("code", "extra", "error_class"),
    [(10, {}, ErrorClass.AUTH), (200, {}, ErrorClass.AUTH), (299, {}, ErrorClass.AUTH),
     (1, {}, ErrorClass.HTTP_5XX), (99999, {"is_transient": True}, ErrorClass.RATE_LIMITED),
     (99999, {}, ErrorClass.PARSE_ERROR)],
)
def test_other_graph_codes(code, extra, error_class):
    assert classify_error({"error": {"code": code, "message": "m", **extra}}).error_class == error_class


def test_http_statuses_without_an_error_object():
    with pytest.raises(CrawlError) as caught:
        decode_response(response(429, "slow down", {"Retry-After": "7"}))
    assert caught.value.error_class == ErrorClass.RATE_LIMITED and caught.value.retry_after == 7
    with pytest.raises(CrawlError) as caught:
        decode_response(response(503, "<html>down</html>"))
    assert caught.value.error_class == ErrorClass.HTTP_5XX
    with pytest.raises(CrawlError) as caught:
        decode_response(response(200, "<html>not json</html>"))
    assert caught.value.error_class == ErrorClass.PARSE_ERROR


def test_usage_headers_pressure_and_delay():
    examples = load_fixture("facebook", "rate_limit_headers_examples.json")
    assert usage_from_headers(examples) is None  # unreadable values never fail a request
    low = usage_from_headers({"X-App-Usage": '{"call_count":28,"total_cputime":25,"total_time":25}'})
    assert (low.pressure, low.delay_s) == (28, 0)
    high = usage_from_headers({"x-app-usage": '{"call_count":90,"total_cputime":5,"total_time":5}'})
    assert high.pressure == 90 and 0 < high.delay_s < 60
    blocked = usage_from_headers({"x-business-use-case-usage": json.dumps(
        {"528144077089525": [{"type": "pages", "call_count": 100, "total_cputime": 3, "total_time": 3,
                              "estimated_time_to_regain_access": 19}]})})
    assert blocked.exhausted and blocked.delay_s == 19 * 60
    assert suggested_delay(100) == 60 and suggested_delay(50) == 0


# -- the adapter ---------------------------------------------------------------------------

def paged_posts() -> tuple[dict, dict]:
    first = load_fixture("facebook", "page_posts_attachments_video_photo.json")
    first["paging"]["next"] = first["paging"]["next"].replace("https://graph.facebook.com/v21.0", API)
    second = {"data": [{"id": "1_2", "created_time": "2024-02-29T23:00:00+0000", "message": "older"}], "paging": {}}
    return first, second


def test_paging_uses_since_until_and_follows_next_with_the_env_token_only():
    first, second = paged_posts()
    first["data"] = first["data"][:1]  # a first page entirely inside the window: read on
    transport = FakeTransport({"/posts": InTurn(first, second)})
    items = list(adapter(transport).iter_records(PAGE, WINDOW))
    assert [(i.item_id, i.variant) for i in items] == [("1885259812583763", "source")]
    one, two = transport.sent
    assert one.url == f"{API}/528144077089525/posts"
    assert (one.params["since"], one.params["until"]) == ("1709251200", "1709337600")
    assert "attachments{" in one.params["fields"] and one.params["access_token"] == FAKE_TOKEN
    assert two.url == f"{API}/528144077089525/posts" and two.params["after"] == "QVFIUmlEX2V4YW1wbGVfYWZ0ZXI"
    assert two.params["access_token"] == FAKE_TOKEN  # the one embedded in `next` ("7d25b98") was dropped
    assert FAKE_TOKEN not in json.dumps([i.to_json_dict() for i in items])


def test_next_from_another_origin_is_rebased_onto_api_base():
    fb = adapter(FakeTransport())
    url, params = fb.follow("https://graph.facebook.com/v10.0/4/posts?access_token=42a90d1531d6&until=78&__paging_token=e5")
    assert url == f"{API}/4/posts" and params == {"until": "78", "__paging_token": "e5"}
    with pytest.raises(CrawlError):
        fb.follow("https://evil.example/steal?access_token=x")


def test_a_page_reaching_before_the_window_is_the_last_one_read():
    first, _ = paged_posts()  # 03-01, 02-29, 02-28: the photo of 02-29 is not the window's
    transport = FakeTransport({"/posts": first})
    items = list(adapter(transport).iter_records(PAGE, WINDOW))
    assert [i.item_id for i in items] == ["1885259812583763"] and len(transport.sent) == 1


def test_time_based_paging_stops_when_the_page_reaches_before_the_window():
    page = load_fixture("facebook", "page_posts_paging_p1.json")
    page["paging"]["next"] = page["paging"]["next"].replace("https://graph.facebook.com/v10.0", API)
    transport = FakeTransport({"/posts": page})
    assert list(adapter(transport).iter_records(parse_source("facebook", "page 4"), DayWindow(date(2021, 7, 2)))) == []
    assert len(transport.sent) == 1


def test_video_attachment_without_source_is_completed_from_its_node():
    first, _ = paged_posts()
    del first["data"][0]["attachments"]["data"][0]["media"]["source"]
    transport = FakeTransport({"/posts": {**first, "paging": {}},
                               "/1885259812583763": load_fixture("facebook", "video_source_by_id.json")})
    [video] = adapter(transport).iter_records(PAGE, WINDOW)
    assert video.kind == "video" and video.media_url.startswith("https://video.xx.fbcdn.net/")
    assert video.published_at == datetime(2024, 3, 1, 12, 0, tzinfo=timezone.utc)
    assert transport.sent[1].params["fields"] == "source,permalink_url,length,format"


def test_token_never_reaches_error_messages():
    echo = {"error": {"code": 190, "message": f"Invalid OAuth access token {FAKE_TOKEN}", "type": "OAuthException"}}
    transport = FakeTransport({"/posts": response(400, json.dumps(echo), url=f"{API}/528144077089525/posts")})
    with pytest.raises(CrawlError) as caught:
        list(adapter(transport).iter_records(PAGE, WINDOW))
    assert caught.value.error_class == ErrorClass.AUTH
    assert FAKE_TOKEN not in caught.value.message and FAKE_TOKEN not in str(caught.value)


def test_resolve_video_and_photo():
    first, _ = paged_posts()
    transport = FakeTransport({"/posts": {**first, "paging": {}}})
    fb = adapter(transport)
    video = next(iter(fb.iter_records(PAGE, WINDOW)))
    fresh = load_fixture("facebook", "video_source_by_id.json")
    fresh["source"] = "https://video.xx.fbcdn.net/fresh.mp4?oh=1&oe=2"
    transport.routes["/1885259812583763"] = fresh
    assert fb.resolve(video).media_url == "https://video.xx.fbcdn.net/fresh.mp4?oh=1&oe=2"
    photo_post = first["data"][1]
    [photo] = normalize.normalize_post(photo_post)
    photo_post = json.loads(json.dumps(photo_post).replace("oh=84abdc928ad00", "oh=fresh"))
    transport.routes["/861347015253552_2225151669332059"] = photo_post
    assert "oh=fresh" in fb.resolve(photo).media_url
    assert fb.url_lifetime_for(photo) == 3600


def test_video_node_still_without_source_fails_that_video_only():
    first, _ = paged_posts()
    del first["data"][0]["attachments"]["data"][0]["media"]["source"]
    first["data"] = first["data"][:1]
    transport = FakeTransport({"/posts": {**first, "paging": {}},
                               "/1885259812583763": load_fixture("facebook", "video_object_fields.json")})
    [failure] = adapter(transport).iter_records(PAGE, WINDOW)
    assert isinstance(failure, ItemError) and (failure.error_class, failure.item_id) == ("parse_error", "1885259812583763")


def test_resolve_of_a_video_node_without_source_is_a_parse_error():
    transport = FakeTransport({"/9420707890600646": load_fixture("facebook", "video_object_fields.json")})
    record = MediaRecord("facebook", "9420707890600646", "source", "video", "c", "m", resolve_ref="video:9420707890600646")
    with pytest.raises(CrawlError) as caught:
        adapter(transport).resolve(record)
    assert caught.value.error_class == ErrorClass.PARSE_ERROR


def test_368_is_a_temporary_block_waited_out_never_a_tombstone():
    [*_, block] = load_fixture("facebook", "errors_throttle_codes_4_17_613.json")
    error = classify_error(block, http_status=400)
    assert (error.error_class, error.platform_code) == (ErrorClass.RATE_LIMITED, "368")
    assert error.policy.retryable and error.policy.slows_platform
    assert error.policy.final_state.value == "failed"  # not "gone": the page is not marked deleted


@pytest.mark.parametrize(
    ("message", "subcode", "error_class"),
    [
        ("(#100) Pages Public Content Access requires either app secret proof or an app token", None, ErrorClass.AUTH),
        ("(#100) This endpoint requires the 'pages_read_engagement' permission", None, ErrorClass.AUTH),
        ("(#100) Requires the manage_pages feature", None, ErrorClass.AUTH),
        ("Unsupported get request. Object with ID '1' does not exist, cannot be loaded due to missing permissions",
         33, ErrorClass.NOT_FOUND),  # 100/33: deleted or private, whatever the wording
        ("(#100) Invalid parameter", None, ErrorClass.NOT_FOUND),
        ("(#100) Tried accessing nonexisting field (attachmentz)", None, ErrorClass.NOT_FOUND),
    ],
)
def test_100_naming_a_credential_is_auth_other_100s_keep_their_class(message, subcode, error_class):
    body = {"error": {"message": message, "type": "OAuthException", "code": 100,
                      **({"error_subcode": subcode} if subcode else {})}}
    assert classify_error(body).error_class == error_class


def test_hostile_error_objects_still_classify():
    huge = classify_error({"error": {"code": 2**64, "error_subcode": -(2**63), "message": ["not", "text"]}})
    assert huge.error_class == ErrorClass.PARSE_ERROR and len(huge.platform_code) <= 32
    nan = classify_error({"error": {"code": float("nan"), "is_transient": "false", "message": "\ud800"}})
    assert nan.error_class == ErrorClass.PARSE_ERROR
    nan.message.encode("utf-8")


def test_a_next_link_that_is_no_url_is_a_parse_error():
    with pytest.raises(CrawlError) as caught:
        adapter(FakeTransport()).follow("https://[::1/v19.0/4/posts")
    assert caught.value.error_class == ErrorClass.PARSE_ERROR


def test_album_nesting_is_walked_without_recursion():
    leaf = {"media_type": "photo", "media": {"image": {"src": "https://scontent.xx.fbcdn.net/p.jpg"}}, "target": {"id": "9"}}
    for _ in range(3000):
        leaf = {"subattachments": {"data": [leaf]}}
    post = {"id": "1_2", "attachments": {"data": [leaf]}}
    assert normalize.normalize_post(post) == []  # deeper than any album: not media we know, and no RecursionError


def test_only_graph_shaped_ids_from_an_answer_are_requested():
    first, _ = paged_posts()
    attachment = first["data"][0]["attachments"]["data"][0]
    del attachment["media"]["source"]
    attachment["target"]["id"] = "../me/accounts?fields=access_token"
    first["data"] = first["data"][:1]
    transport = FakeTransport({"/posts": {**first, "paging": {}}})
    [failure] = adapter(transport).iter_records(PAGE, WINDOW)
    assert isinstance(failure, ItemError) and failure.error_class == "parse_error"
    assert transport.paths() == ["/facebook/v19.0/528144077089525/posts"]  # the token went nowhere else
    record = MediaRecord("facebook", "x", "image", "image", "c", "m", resolve_ref="post:1_2/../../me")
    with pytest.raises(CrawlError) as caught:
        adapter(transport).resolve(record)
    assert caught.value.error_class == ErrorClass.PARSE_ERROR

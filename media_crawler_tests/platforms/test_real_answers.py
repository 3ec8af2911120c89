"""Answers the platforms really give that the crawler once called drift (issue 26, item 13):
a Facebook /{page-id}/videos page whose entries lack `source` (each video's node has it,
as for attachments), and a Bilibili view from before bvids existed (aid only)."""
from __future__ import annotations

import copy
import io
import json
from datetime import date

import pytest

from media_crawler.models import DayWindow, ItemError, MediaRecord
from media_crawler.platforms.registry import parse_source
from media_crawler.platform_spec import PlatformSettings
from media_crawler.platforms.bilibili import normalize as bilibili
from media_crawler.platforms.bilibili.client import BilibiliAdapter
from media_crawler.platforms.bilibili.ids import aid_to_bvid, bvid_to_aid
from media_crawler.platforms.facebook.client import FacebookAdapter
from media_crawler.platforms.normalize_cli import run_normalize

from .fakes import FakeTransport, load_fixture

FB_API = "http://127.0.0.1:9/facebook/v19.0"
VIDEOS_PAGE = parse_source("facebook", "page 63721559732", {"edge": "videos"})
VIDEOS_DAY = DayWindow(date(2021, 6, 30))  # the edge's second entry, 9420707890600646


@pytest.fixture(autouse=True)
def token(monkeypatch):
    monkeypatch.setenv("FB_ACCESS_TOKEN", "EAAB-fake-token-1234567890")


def normalized(platform: str, body, tmp_path) -> tuple[int, list[dict], list[dict]]:
    path = tmp_path / "answer.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    status = run_normalize(platform, [str(path)], out=out, err=err)
    return status, [json.loads(line) for line in out.getvalue().splitlines()], [
        json.loads(line) for line in err.getvalue().splitlines()]


# -- Facebook /{page-id}/videos -------------------------------------------------------------

def video_node(video_id: str) -> dict:
    """The node as the crawl asks for it: `fields=source,permalink_url,length,format`."""
    node = load_fixture("facebook", "video_source_by_id.json")
    return {"id": video_id, **{key: node[key] for key in ("source", "permalink_url", "length", "format")}}


def test_a_videos_edge_entry_without_source_is_completed_from_its_node():
    edge = load_fixture("facebook", "page_videos_p1.json")
    transport = FakeTransport({"/63721559732/videos": {**edge, "paging": {}},
                               "/9420707890600646": video_node("9420707890600646")})
    adapter = FacebookAdapter(PlatformSettings(api_base=FB_API), transport)
    [video] = adapter.iter_records(VIDEOS_PAGE, VIDEOS_DAY)
    assert isinstance(video, MediaRecord), video
    assert (video.item_id, video.kind, video.resolve_ref) == ("9420707890600646", "video", "video:9420707890600646")
    assert video.media_url.startswith("https://video.xx.fbcdn.net/")
    assert video.meta["title"] == "sample title 5", "the edge entry's fields stay with the node's source"
    assert video.published_at.date() == date(2021, 6, 30)
    assert [r.path for r in transport.sent] == ["/facebook/v19.0/63721559732/videos", "/facebook/v19.0/9420707890600646"]
    assert transport.sent[1].params["fields"] == "source,permalink_url,length,format"


def test_a_video_whose_node_has_no_source_either_is_a_note_not_a_parse_error(caplog):
    edge = load_fixture("facebook", "page_videos_p1.json")
    sourceless = load_fixture("facebook", "video_object_fields.json")  # fields asked, no source given
    transport = FakeTransport({"/63721559732/videos": {**edge, "paging": {}}, "/9420707890600646": sourceless})
    adapter = FacebookAdapter(PlatformSettings(api_base=FB_API), transport)
    assert list(adapter.iter_records(VIDEOS_PAGE, VIDEOS_DAY)) == []
    assert "9420707890600646" in caplog.text and "source" in caplog.text


def test_a_videos_edge_entry_with_source_needs_no_node():
    edge = load_fixture("facebook", "page_videos_p1.json")
    signed = {**edge["data"][1], "source": "https://video.xx.fbcdn.net/v/t42/a.mp4?oh=1&oe=2"}
    transport = FakeTransport({"/63721559732/videos": {"data": [signed], "paging": {}}})
    [video] = FacebookAdapter(PlatformSettings(api_base=FB_API), transport).iter_records(VIDEOS_PAGE, VIDEOS_DAY)
    assert isinstance(video, MediaRecord) and video.media_url == signed["source"] and len(transport.sent) == 1


def test_normalize_notes_a_videos_page_without_sources(tmp_path):
    status, lines, notes = normalized("facebook", load_fixture("facebook", "page_videos_p1.json"), tmp_path)
    assert status == 0 and lines == []
    assert not [n for n in notes if "error_class" in n], notes
    assert [n["item_id"] for n in notes if n.get("shape") == "facebook video without source"] == [
        "1829641627435282", "9420707890600646", "323911791541183"]


def test_the_posts_edge_stays_the_default():
    transport = FakeTransport({"/posts": {"data": [], "paging": {}}})
    page = parse_source("facebook", "page 63721559732")
    assert list(FacebookAdapter(PlatformSettings(api_base=FB_API), transport).iter_records(page, VIDEOS_DAY)) == []
    assert transport.sent[0].path.endswith("/63721559732/posts")


# -- Bilibili: aid only ------------------------------------------------------------------------

# Pairs published with the algorithm (and on bilibili.com: av170001 is the site's own example).
KNOWN_PAIRS = [(170001, "BV17x411w7KC"), (2, "BV1xx411c7mD"), (455017605, "BV1Q541167Qg"),
               (882584971, "BV1mK4y1C7Bz"), (111298867365120, "BV1L9Uoa9EUx")]


@pytest.mark.parametrize(("aid", "bvid"), KNOWN_PAIRS)
def test_aid_and_bvid_convert_both_ways(aid, bvid):
    assert aid_to_bvid(aid) == bvid and bvid_to_aid(bvid) == aid


@pytest.mark.parametrize("bad", [0, -1, 1 << 51, True, "170001"])
def test_an_aid_out_of_range_is_refused(bad):
    with pytest.raises(ValueError):
        aid_to_bvid(bad)


@pytest.mark.parametrize("bad", ["BV17x411w7K", "bv17x411w7KC", "BV17x411w7K0", "av170001"])
def test_a_text_that_is_no_bvid_is_refused(bad):
    with pytest.raises(ValueError):
        bvid_to_aid(bad)


def aid_only_view(aid: int = 170001) -> dict:
    view = load_fixture("bilibili", "view_ok.json")
    del view["data"]["bvid"]
    view["data"]["aid"] = aid
    return view


def test_a_view_from_before_bvids_is_keyed_on_the_bvid_its_aid_encodes_to(tmp_path):
    info = bilibili.video_info_from_view(aid_only_view()["data"])
    assert info.bvid == "BV17x411w7KC" and {p.bvid for p in info.parts} == {"BV17x411w7KC"}
    status, [cover], notes = normalized("bilibili", aid_only_view(), tmp_path)
    assert status == 0 and cover["item_id"] == "BV17x411w7KC" and cover["variant"] == "cover"
    assert cover["canonical_url"] == "https://www.bilibili.com/video/BV17x411w7KC#cover"


def test_a_view_naming_neither_bvid_nor_a_valid_aid_is_still_a_parse_error(tmp_path):
    view = aid_only_view()
    view["data"]["aid"] = 0
    status, [line], _ = normalized("bilibili", view, tmp_path)
    assert status == 1 and line["error_class"] == "parse_error"


def test_an_uploads_list_of_aids_is_crawled_by_bvid():
    arc = load_fixture("bilibili", "space_wbi_arc_search_ok.json")
    entry = copy.deepcopy(arc["data"]["list"]["vlist"][0])
    del entry["bvid"]
    entry["aid"] = 170001
    arc["data"]["list"]["vlist"] = [entry]
    arc["data"]["page"]["count"] = 1
    asked = []

    def view(request):
        asked.append(request.params["bvid"])
        return aid_only_view()

    transport = FakeTransport({
        "/x/web-interface/nav": load_fixture("bilibili", "nav_wbi_keys_not_logged_in.json"),
        "/x/space/wbi/arc/search": arc, "/x/web-interface/view": view,
        "/x/player/wbi/playurl": load_fixture("bilibili", "playurl_dash_fnval4048.json"),
    })
    adapter = BilibiliAdapter(PlatformSettings(api_base="http://127.0.0.1:9/bilibili"), transport)
    items = list(adapter.iter_records(parse_source("bilibili", "user 900408"), DayWindow(date(2025, 4, 22))))
    assert not [i for i in items if isinstance(i, ItemError)], items
    assert asked == ["BV17x411w7KC"]
    assert {i.item_id.split(":")[0] for i in items} == {"BV17x411w7KC"} and len(items) >= 3  # cover, video, audio

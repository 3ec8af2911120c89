"""`media-crawler normalize`: every saved fixture gives the expected records, errors and exit status."""
from __future__ import annotations

import io
import json
from datetime import datetime, timezone

import pytest

from media_crawler.platform_spec import PlatformSettings
from media_crawler.platforms.normalize_cli import run_normalize

from .fakes import FIXTURES, load_fixture

NOW = datetime(2019, 7, 15, 4, 0, tzinfo=timezone.utc)

# file → (exit status, records on stdout, per-item errors on stderr)
EXPECTED = {
    "bilibili/space_wbi_arc_search_ok.json": (0, 2, 0),
    "bilibili/view_ok.json": (0, 1, 0),
    "bilibili/pagelist_multipage.json": (0, 0, 0),
    "bilibili/playurl_dash_fnval4048.json": (0, 2, 0),
    "bilibili/playurl_mp4_durl.json": (0, 1, 0),
    "bilibili/nav_wbi_keys_not_logged_in.json": (0, 0, 0),
    "bilibili/error_-412_request_blocked.json": (1, 0, 0),
    "bilibili/error_-352_risk_control_v_voucher.json": (1, 0, 0),
    "bilibili/view_error_-404_deleted.json": (1, 0, 0),
    "bilibili/view_error_62002_invisible.json": (1, 0, 0),
    "weibo/getIndex_since_id_livephoto_video.json": (0, 4, 1),
    "weibo/getIndex_cards_page2.json": (0, 22, 0),
    "weibo/ajax_feed_statuses.json": (0, 3, 0),
    "weibo/ajax_statuses_mymblog.json": (0, 2, 0),
    "weibo/ajax_statuses_show_video_playback_list.json": (0, 1, 0),
    "weibo/getIndex_error_ok0_no_content.json": (0, 0, 0),
    "weibo/error_ok-100_login_required.json": (1, 0, 0),
    "urls/feed_ok.json": (0, 2, 0),
    "urls/error_not_a_feed.json": (1, 0, 0),
    "facebook/page_posts_attachments_video_photo.json": (0, 2, 0),
    "facebook/page_posts_paging_p1.json": (0, 0, 0),
    "facebook/post_attachments_album_subattachments.json": (0, 7, 0),
    "facebook/video_source_by_id.json": (0, 1, 0),
    "facebook/video_object_fields.json": (0, 0, 0),  # no source: a note, the crawl asks again
    "facebook/page_videos_p1.json": (0, 0, 0),  # entries without source: notes (test_real_answers.py)
    "facebook/error_100_33_object_not_found_deleted_or_private.json": (1, 0, 0),
    "facebook/error_100_missing_permission.json": (1, 0, 0),
    "facebook/error_100_pages_public_content_access.json": (1, 0, 0),
    "facebook/error_190_463_session_expired.json": (1, 0, 0),
    "facebook/error_190_token_expired_docs_template.json": (1, 0, 0),
    "facebook/error_32_page_request_limit_with_headers.json": (1, 0, 0),
    "facebook/error_80001_page_buc_rate_limit.json": (1, 0, 0),
    "facebook/errors_throttle_codes_4_17_613.json": (1, 0, 0),
    "facebook/rate_limit_headers_examples.json": (1, 0, 0),  # headers, not a response
}


def run(platform: str, *paths) -> tuple[int, list[dict], list[dict]]:
    out, err = io.StringIO(), io.StringIO()
    status = run_normalize(platform, [str(p) for p in paths], out=out, err=err, now=NOW)
    return status, [json.loads(line) for line in out.getvalue().splitlines()], [
        json.loads(line) for line in err.getvalue().splitlines()]


def test_every_fixture_is_covered():
    on_disk = {f"{p.parent.name}/{p.name}" for p in FIXTURES.glob("*/*.json") if p.parent.name != "drift"}
    assert on_disk == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture(name):
    status, lines, notes = run(name.split("/")[0], FIXTURES / name)
    expected_status, expected_records, expected_item_errors = EXPECTED[name]
    assert status == expected_status
    records = [line for line in lines if "item_id" in line]
    assert len(records) == expected_records
    assert len([n for n in notes if "error_class" in n]) == expected_item_errors
    for record in records:
        assert {"platform", "item_id", "variant", "kind", "canonical_url", "media_url", "published_at"} <= record.keys()
    if expected_status == 1:
        assert lines and all({"error_class", "platform_code", "message"} <= line.keys() for line in lines)


def test_error_output_names_class_and_code():
    status, [line], _ = run("bilibili", FIXTURES / "bilibili/view_error_62002_invisible.json")
    assert (status, line["error_class"], line["platform_code"]) == (1, "not_found", "62002")
    status, lines, _ = run("facebook", FIXTURES / "facebook/errors_throttle_codes_4_17_613.json")
    assert [line["platform_code"] for line in lines] == ["4", "17/2446079", "613", "368"]


def test_playurl_without_view_context_keys_on_its_own_cid_and_uses_settings():
    out, err = io.StringIO(), io.StringIO()
    run_normalize("bilibili", [str(FIXTURES / "bilibili/playurl_dash_fnval4048.json")], out=out, err=err,
                  settings=PlatformSettings(options={"max_height": 720, "codec_order": ("hevc",)}))
    video, audio = (json.loads(line) for line in out.getvalue().splitlines())
    # The cid is in the answer (the stream URLs' upgcxcode/…/143623477/ directory); the bvid is not.
    assert (video["item_id"], video["variant"], audio["variant"]) == ("unknown:143623477", "video-13-12", "audio-34786")
    assert video["resolve_ref"] == "playurl:unknown:143623477"
    [note] = [json.loads(line) for line in err.getvalue().splitlines()]
    assert note["cid"] == "143623477" and "view answer" in note["message"]


def test_a_view_given_alongside_names_the_playurl_video(tmp_path):
    view = load_fixture("bilibili", "view_ok.json")
    view["data"]["pages"][0]["cid"] = view["data"]["cid"] = 143623477
    view_path = tmp_path / "view.json"
    view_path.write_text(json.dumps(view), encoding="utf-8")
    status, lines, notes = run("bilibili", FIXTURES / "bilibili/playurl_dash_fnval4048.json", view_path)
    tracks = [line for line in lines if line["variant"] != "cover"]
    assert status == 0 and {t["item_id"] for t in tracks} == {f"{view['data']['bvid']}:143623477"}
    assert {t["meta"]["title"] for t in tracks} == {view["data"]["title"]}
    assert not [n for n in notes if n.get("shape") == "bilibili playurl"]


def test_video_attachment_without_source_is_no_drift(tmp_path):
    posts = load_fixture("facebook", "page_posts_attachments_video_photo.json")
    del posts["data"][0]["attachments"]["data"][0]["media"]["source"]
    path = tmp_path / "posts.json"
    path.write_text(json.dumps(posts), encoding="utf-8")
    status, lines, notes = run("facebook", path)
    assert status == 0 and [line["item_id"] for line in lines] == ["4478049458999119"]  # the photo
    assert not [n for n in notes if "error_class" in n]  # the crawl completes the video from its node
    [note] = [n for n in notes if n.get("shape") == "facebook video without source"]
    assert note["item_id"] == "1885259812583763" and "fields=source" in note["message"]


def test_drifted_item_fails_alone_and_garbage_files_fail(tmp_path):
    body = load_fixture("weibo", "ajax_feed_statuses.json")
    body["statuses"][-1]["pic_infos"]["0066h7fFgy1h0jtsfs1ujj30u027vtft"] = {"type": "pic", "new_layout": {}}
    body["statuses"][0]["field_added_next_year"] = [1, 2, 3]
    drifted = tmp_path / "drifted.json"
    drifted.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")
    garbage = tmp_path / "garbage.json"
    garbage.write_text("<html>visitor wall</html>")
    status, lines, notes = run("weibo", drifted, garbage)
    assert status == 1
    assert [line["item_id"] for line in lines if "item_id" in line] == [
        "4754409cly1h0jleiy7jlj20cj0b0my8", "d7562ea8gy1h0ju65not6g209q05qqud"]
    assert lines[-1]["error_class"] == "parse_error"
    [item_error] = [n for n in notes if "error_class" in n]
    assert (item_error["error_class"], item_error["item_id"]) == ("parse_error", "0066h7fFgy1h0jtsfs1ujj30u027vtft")


def test_unknown_platform():
    status, [line], _ = run("myspace", FIXTURES / "weibo/getIndex_error_ok0_no_content.json")
    assert status == 1 and line["error_class"] == "parse_error"


def test_a_drifted_single_object_is_a_parse_error(tmp_path):
    view = load_fixture("bilibili", "view_ok.json")
    view["data"]["bvid"] = {"became": "an object"}
    path = tmp_path / "view.json"
    path.write_text(json.dumps(view))
    status, [line], _ = run("bilibili", path)
    assert (status, line["error_class"]) == (1, "parse_error")

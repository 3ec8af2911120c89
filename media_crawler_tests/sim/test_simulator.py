"""The platform simulator over HTTP: API answers shaped like the platform fixtures, WBI
checking, signed/expiring media URLs and Referer rules, Range/ETag serving, decodable
media matching /_sim/truth, the fault sources, stats, and seed determinism."""
from __future__ import annotations

import hashlib
import io
import json
import re
import signal
import subprocess
import sys
import time

import pytest
import requests
from PIL import Image

from media_crawler_sim import Simulator, wbi
from media_crawler_sim.app import Behaviour
from media_crawler_tests.sim.conftest import REFERERS, assert_like, fixture, top_level_boxes

WEIBO_TIME = re.compile(r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} \d{2} \d{2}:\d{2}:\d{2} \+0800 \d{4}$")


def signed_arc_search(sim, http, **params):
    signed = wbi.sign({"order": "pubdate", **params}, sim.world.wbi_img_key, sim.world.wbi_sub_key, int(time.time()))
    return http.get(sim.base_url + "/bilibili/x/space/wbi/arc/search", params=signed).json()


def bilibili_videos(sim, http):
    nav = http.get(sim.base_url + "/bilibili/x/web-interface/nav").json()
    assert_like(nav["data"]["wbi_img"], fixture("bilibili/nav_wbi_keys_not_logged_in.json")["data"]["wbi_img"])
    return signed_arc_search(sim, http, mid="12345", pn="1", ps="30")["data"]["list"]["vlist"]


# --- Bilibili -----------------------------------------------------------------------

def test_bilibili_wbi_signature_is_checked(sim, http):
    answer = signed_arc_search(sim, http, mid="12345", pn="1", ps="2")
    assert answer["code"] == 0 and answer["data"]["page"] == {"pn": 1, "ps": 2, "count": 4}
    sample = fixture("bilibili/space_wbi_arc_search_ok.json")["data"]
    vlist_keys = ["aid", "bvid", "title", "pic", "created", "length", "mid", "author"]
    assert_like(answer["data"]["list"]["vlist"][0], sample["list"]["vlist"][0], vlist_keys)
    created = [video["created"] for video in answer["data"]["list"]["vlist"]]
    assert created == sorted(created, reverse=True)
    unsigned = http.get(sim.base_url + "/bilibili/x/space/wbi/arc/search", params={"mid": "12345"}).json()
    assert unsigned["code"] == -403
    tampered = wbi.sign({"mid": "12345"}, sim.world.wbi_img_key, sim.world.wbi_sub_key, 1)
    tampered["mid"] = "12346"
    assert http.get(sim.base_url + "/bilibili/x/space/wbi/arc/search", params=tampered).json()["code"] == -403


def test_bilibili_view_and_dash_playurl_shapes(sim, http):
    videos = bilibili_videos(sim, http)
    assert len(videos) == 4
    view_sample = fixture("bilibili/view_ok.json")["data"]
    dash_sample = fixture("bilibili/playurl_dash_fnval4048.json")["data"]["dash"]
    part_counts, saw_durl = [], False
    for entry in videos:
        view = http.get(sim.base_url + "/bilibili/x/web-interface/view", params={"bvid": entry["bvid"]}).json()["data"]
        assert_like(view, view_sample, ["bvid", "aid", "cid", "pages", "pic", "title", "owner", "pubdate"])
        assert_like(view["pages"][0], view_sample["pages"][0], ["cid", "page", "part", "duration", "dimension"])
        pages = http.get(sim.base_url + "/bilibili/x/player/pagelist", params={"bvid": entry["bvid"]}).json()["data"]
        assert [page["cid"] for page in pages] == [page["cid"] for page in view["pages"]]
        part_counts.append(len(pages))
        params = {"bvid": entry["bvid"], "cid": view["cid"], "qn": 127, "fnval": 4048, "fnver": 0, "fourk": 1}
        data = http.get(sim.base_url + "/bilibili/x/player/wbi/playurl", params=params).json()["data"]
        if "durl" in data:
            saw_durl = True
            assert {"order", "length", "size", "url", "backup_url"} <= set(data["durl"][0])
            continue
        assert set(data["dash"]["video"][0]) == set(dash_sample["video"][0])
        assert_like(data["dash"]["video"][0], dash_sample["video"][0])
        assert_like(data["dash"]["audio"][0], dash_sample["audio"][0])
        tracks = {(track["id"], track["codecid"]): track["height"] for track in data["dash"]["video"]}
        heights = {16: 360, 32: 480, 64: 720, 80: 1080, 112: 1080}
        assert tracks == {(qn, codec): height for qn, height in heights.items() for codec in (7, 12)}
        assert {track["id"] for track in data["dash"]["audio"]} == {30216, 30280}
    assert sorted(part_counts) == [1, 1, 1, 3] and saw_durl


def test_bilibili_media_needs_referer_and_valid_signature(sim, http):
    entry = bilibili_videos(sim, http)[0]
    cid = http.get(sim.base_url + "/bilibili/x/player/pagelist", params={"bvid": entry["bvid"]}).json()["data"][0]["cid"]
    params = {"bvid": entry["bvid"], "cid": cid, "fnval": 4048}
    data = http.get(sim.base_url + "/bilibili/x/player/wbi/playurl", params=params).json()["data"]
    url = data["dash"]["video"][0]["baseUrl"]
    assert re.search(r"[?&]deadline=\d+&", url) and "upsig=" in url
    assert http.get(url).status_code == 403
    answer = http.get(url, headers={"Referer": REFERERS["bilibili"]})
    assert answer.status_code == 200 and top_level_boxes(answer.content)[0] == b"ftyp"
    assert http.get(data["dash"]["video"][0]["backupUrl"][0], headers={"Referer": REFERERS["bilibili"]}).status_code == 200
    tampered = re.sub(r"deadline=(\d+)", lambda match: f"deadline={int(match[1]) + 1}", url)
    assert http.get(tampered, headers={"Referer": REFERERS["bilibili"]}).status_code == 403


def test_signed_urls_expire_and_fresh_ones_work(http):
    now = [time.time()]
    with Simulator(seed=1, port=0, behaviour=Behaviour(url_lifetime_s=60, clock=lambda: now[0])) as short_lived:
        video = next(iter(short_lived.world.facebook_videos))
        node_url = f"{short_lived.base_url}/facebook/v19.0/{video}"
        source = http.get(node_url, params={"access_token": "t", "fields": "source"}).json()["source"]
        assert "oh=" in source and "oe=" in source
        assert http.get(source).status_code == 200
        now[0] += 61
        assert http.get(source).status_code == 403
        fresh = http.get(node_url, params={"access_token": "t", "fields": "source"}).json()["source"]
        assert http.get(fresh).status_code == 200


# --- Weibo --------------------------------------------------------------------------

def test_weibo_mobile_feed_pages_by_since_id_to_the_end(sim, http):
    sample = fixture("weibo/getIndex_since_id_livephoto_video.json")["data"]
    sample_mblog = sample["cards"][0]["mblog"]
    params = {"type": "uid", "value": "678", "containerid": "107603678"}
    mblogs, card_types = [], set()
    while True:
        answer = http.get(sim.base_url + "/weibo-m/api/container/getIndex", params=params).json()
        assert answer["ok"] == 1
        assert_like(answer["data"]["cardlistInfo"], sample["cardlistInfo"], ["containerid", "total"])
        card_types |= {card["card_type"] for card in answer["data"]["cards"]}
        mblogs += [card["mblog"] for card in answer["data"]["cards"] if card["card_type"] == 9]
        since_id = answer["data"]["cardlistInfo"].get("since_id")
        if not since_id:
            break
        params["since_id"] = since_id
    assert card_types == {9, 11} and len(mblogs) == 9
    for mblog in mblogs:
        assert_like(mblog, sample_mblog, ["created_at", "id", "mid", "bid", "text", "pic_num", "user"])
        assert WEIBO_TIME.match(mblog["created_at"])
    params["since_id"] = "1"
    past_the_end = http.get(sim.base_url + "/weibo-m/api/container/getIndex", params=params).json()
    assert past_the_end == fixture("weibo/getIndex_error_ok0_no_content.json")
    live = next(pic for mblog in mblogs for pic in mblog.get("pics", []) if pic.get("type") == "livephoto")
    assert_like(live, sample_mblog["pics"][0])
    video = next(mblog["page_info"] for mblog in mblogs if "page_info" in mblog)
    assert {"stream_url", "stream_url_hd", "mp4_720p_mp4"} <= set(video["media_info"])
    assert "Expires=" in video["media_info"]["stream_url"]
    assert any(mblog.get("retweeted_status", {}).get("deleted") == "1" for mblog in mblogs)
    assert any(mblog.get("retweeted_status", {}).get("pics") for mblog in mblogs)
    gallery = next(mblog for mblog in mblogs if mblog["pic_num"] > 9)
    assert len(gallery["pics"]) == 9
    detail = http.get(sim.base_url + "/weibo-m/statuses/show", params={"id": gallery["id"]}).json()
    assert detail["ok"] == 1 and len(detail["data"]["pics"]) == gallery["pic_num"]
    image = live["large"]["url"]
    assert http.get(image).status_code == 403
    assert http.get(image, headers={"Referer": REFERERS["weibo"]}).status_code == 200


def test_weibo_ajax_feed_detail_and_longtext(sim, http):
    sample = fixture("weibo/ajax_statuses_mymblog.json")["data"]
    sample_pic = next(iter(sample["list"][0]["pic_infos"].values()))
    playback_sample = fixture("weibo/ajax_statuses_show_video_playback_list.json")["page_info"]["media_info"]["playback_list"][0]
    mblogs, page = [], 1
    while True:
        params = {"uid": "679", "page": page, "feature": 0}
        data = http.get(sim.base_url + "/weibo/ajax/statuses/mymblog", params=params).json()["data"]
        assert_like(data, sample, ["since_id", "list", "total"])
        mblogs += data["list"]
        if not data["since_id"]:
            break
        page += 1
    assert len(mblogs) == 6
    pictures = [info for mblog in mblogs for info in mblog.get("pic_infos", {}).values()]
    for info in pictures:
        assert_like(info, sample_pic, ["thumbnail", "bmiddle", "large", "original", "largest", "mw2000", "pic_id", "type"])
        assert_like(info["largest"], sample_pic["largest"], ["url", "width", "height"])
    assert "livephoto" in {info["type"] for info in pictures}
    video = next(mblog["page_info"] for mblog in mblogs if "page_info" in mblog)
    assert_like(video["media_info"]["playback_list"][0]["meta"], playback_sample["meta"], ["label", "quality_index"])
    play_info = video["media_info"]["playback_list"][0]["play_info"]
    assert_like(play_info, playback_sample["play_info"], ["url", "width", "height", "size"])
    gallery = next(mblog for mblog in mblogs if mblog["pic_num"] > 9)
    shown = http.get(sim.base_url + "/weibo/ajax/statuses/show", params={"id": gallery["mblogid"]}).json()
    assert shown["ok"] == 1 and len(shown["pic_ids"]) == gallery["pic_num"] == 10
    long_post = next(mblog for mblog in mblogs if mblog["isLongText"])
    full = http.get(sim.base_url + "/weibo/ajax/statuses/longtext", params={"id": long_post["mblogid"]}).json()
    assert len(full["data"]["longTextContent"]) > len(long_post["text_raw"])


# --- Facebook -----------------------------------------------------------------------

FB_FIELDS = "id,created_time,message,permalink_url,full_picture,attachments{media_type,type,media,target,url,subattachments}"


def facebook_posts(sim, http, page: str, **params) -> tuple[list[dict], list[dict]]:
    url, query = f"{sim.base_url}/facebook/v19.0/{page}/posts", {"access_token": "sim-token", "fields": FB_FIELDS, **params}
    posts, pagings = [], []
    while url:
        answer = http.get(url, params=query).json()
        posts += answer["data"]
        pagings.append(answer.get("paging", {}))
        url, query = answer.get("paging", {}).get("next"), None
    return posts, pagings


def test_facebook_cursor_and_time_paging(sim, http):
    posts, pagings = facebook_posts(sim, http, "42")
    assert len(posts) == 6 and len(pagings) == 2
    assert_like(pagings[0]["cursors"], fixture("facebook/page_posts_attachments_video_photo.json")["paging"]["cursors"])
    kinds = {attachment["media_type"] for post in posts for attachment in post.get("attachments", {}).get("data", [])}
    assert kinds == {"photo", "video", "album"}
    album = next(a for post in posts for a in post.get("attachments", {}).get("data", []) if a["media_type"] == "album")
    album_fixture = fixture("facebook/post_attachments_album_subattachments.json")
    album_sample = album_fixture["attachments"]["data"][0]["subattachments"]["data"][0]
    assert_like(album["subattachments"]["data"][0], album_sample, ["media", "target", "type", "url"])
    video = next(a for post in posts for a in post.get("attachments", {}).get("data", []) if a["media_type"] == "video")
    assert "source" in video["media"] and video["target"]["id"]
    posts, pagings = facebook_posts(sim, http, "43")
    assert len(posts) == 5 and "cursors" not in pagings[0]
    assert "until=" in pagings[0]["next"] and "__paging_token=" in pagings[0]["next"]


def test_facebook_since_until_limit_and_token(sim, http):
    day_start = int(sim.world.facebook_pages["42"].posts[-1].created.replace(hour=0, minute=0, second=0).timestamp())
    for page in ("42", "43"):
        posts, _ = facebook_posts(sim, http, page, since=day_start, until=day_start + 86399, limit=1)
        all_posts = sim.world.facebook_pages[page].posts
        in_day = [post for post in all_posts if day_start <= post.created.timestamp() < day_start + 86400]
        expected = [post.id for post in in_day]
        assert [post["id"] for post in posts] == expected and expected
    missing = http.get(f"{sim.base_url}/facebook/v19.0/42/posts")
    assert missing.status_code == 400
    error_sample = fixture("facebook/error_190_463_session_expired.json")["error"]
    assert_like(missing.json()["error"], error_sample, ["type", "code", "message"])
    assert missing.json()["error"]["code"] == 190


# --- media serving ------------------------------------------------------------------

def test_range_etag_and_if_range(sim, http):
    url = sim.base_url + "/media/urls/demo/large.jpg"
    full = http.get(url)
    etag, size = full.headers["ETag"], len(full.content)
    assert etag and http.get(url).headers["ETag"] == etag and int(full.headers["Content-Length"]) == size
    part = http.get(url, headers={"Range": "bytes=100-199"})
    assert part.status_code == 206 and part.content == full.content[100:200]
    assert part.headers["Content-Range"] == f"bytes 100-199/{size}"
    assert http.get(url, headers={"Range": "bytes=-10"}).content == full.content[-10:]
    beyond = http.get(url, headers={"Range": f"bytes={size}-"})
    assert beyond.status_code == 416 and beyond.headers["Content-Range"] == f"bytes */{size}"
    assert http.get(url, headers={"Range": "bytes=100-", "If-Range": etag}).status_code == 206
    assert http.get(url, headers={"Range": "bytes=100-", "If-Range": '"stale"'}).status_code == 200
    head = http.head(url)
    assert head.status_code == 200 and head.headers["Content-Length"] == str(size) and not head.content


def test_truth_matches_served_bytes_and_media_decode(sim, http):
    truth = http.get(sim.base_url + "/_sim/truth").json()
    assert truth["seed"] == 1 and truth["days"] == ["2026-11-25", "2026-11-26", "2026-11-27"]
    media = truth["media"]
    kinds = [entry["kind"] for entry in media]
    assert kinds.count("image") >= 25 and kinds.count("video") >= 5
    for source in truth["sources"]:
        if source["platform"] != "urls":
            label = f"{source['platform']}: {source['spec']}"
            assert {entry["day"] for entry in media if entry["source"] == label} == set(truth["days"])
    for entry in media:
        file = sim.world.catalog.lookup(entry["path"])
        body = http.get(sim.app.cdn.url(sim.base_url, file), headers={"Referer": REFERERS.get(entry["platform"], "")}).content
        assert hashlib.sha256(body).hexdigest() == entry["sha256"] and len(body) == entry["size"], entry["path"]
        if entry["kind"] == "image":
            with Image.open(io.BytesIO(body)) as image:
                image.load()
                assert image.format in ("JPEG", "PNG", "GIF")
        else:
            boxes = top_level_boxes(body)
            assert boxes[0] == b"ftyp" and b"moov" in boxes and b"mdat" in boxes
    assert len({entry["sha256"] for entry in media + truth["alternates"]}) == len(media) + len(truth["alternates"])


def test_same_seed_same_world_and_answers(http):
    frozen = 1_800_000_000.0
    answers, truths = [], []
    for _ in range(2):
        with Simulator(seed=7, port=0, behaviour=Behaviour(clock=lambda: frozen)) as sim:
            truths.append([(entry["path"], entry["sha256"], entry["size"]) for entry in sim.truth()["media"]])
            body = http.get(sim.base_url + "/weibo/ajax/statuses/mymblog", params={"uid": "679", "page": 1}).text
            answers.append(body.replace(sim.base_url, "BASE"))
    assert truths[0] == truths[1] and answers[0] == answers[1]
    with Simulator(seed=8, port=0) as other:
        assert {sha for _, sha, _ in truths[0]}.isdisjoint(entry["sha256"] for entry in other.truth()["media"])


# --- fault sources and stats --------------------------------------------------------

def test_fault_sources(sim, http):
    signed = wbi.sign({"mid": "666"}, sim.world.wbi_img_key, sim.world.wbi_sub_key, int(time.time()))
    answer = http.get(sim.base_url + "/bilibili/x/space/wbi/arc/search", params=signed)
    assert answer.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(answer.text)
    html_items = http.get(sim.base_url + "/urls/html.json").json()["items"]
    types = [http.get(item["url"]).headers["Content-Type"] for item in html_items]
    assert sum(kind.startswith("text/html") for kind in types) == 1
    http.post(sim.base_url + "/_sim/stats/reset")
    missing, broken, throttled, truncated = (item["url"] for item in http.get(sim.base_url + "/urls/errors.json").json()["items"])
    assert [http.get(missing).status_code, http.get(missing).status_code] == [404, 404]
    assert http.head(missing).status_code == 404
    assert http.head(throttled).status_code == 200  # a HEAD probe does not use up the one 429
    assert [http.get(broken).status_code, http.get(broken).status_code] == [500, 500]
    first = http.get(throttled)
    assert first.status_code == 429 and first.headers["Retry-After"] == "1"
    assert http.get(throttled).status_code == 200
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        http.get(truncated)
    assert http.get(truncated).status_code == 200
    stats = http.get(sim.base_url + "/_sim/stats").json()
    assert stats["requests"]["/media/urls"] == 10 and stats["requests"]["/urls"] == 1
    assert stats["by_path"]["/media/urls/errors/throttled.jpg"]["statuses"] == {"200": 2, "429": 1}
    http.get(sim.base_url + "/_sim/stats", params={"reset": "1"})
    assert http.get(throttled).status_code == 429  # reset re-arms "fails once"


def test_fault_rate_answers_503(http):
    with Simulator(seed=1, port=0, behaviour=Behaviour(fault_rate=1.0)) as flaky:
        answer = http.get(flaky.base_url + "/media/urls/demo/tiny.jpg")
        assert answer.status_code == 503 and answer.headers["Retry-After"] == "1"


def test_cli_prints_base_url_and_stops_on_sigterm(http):
    command = [sys.executable, "-m", "media_crawler_sim", "--port", "0", "--seed", "2", "--days", "2"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        base_url = process.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", base_url)
        truth = http.get(base_url + "/_sim/truth", timeout=5).json()
        assert truth["seed"] == 2 and len(truth["days"]) == 2
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=5) == 0
    finally:
        if process.poll() is None:
            process.kill()

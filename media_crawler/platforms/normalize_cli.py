"""`media-crawler normalize PLATFORM FILE...`: what a saved API response yields.

Each file's shape is detected (Bilibili arc/search, view, playurl, pagelist,
nav; Weibo getIndex, ajax mymblog / feed statuses, show; Facebook posts
page, single post, video node or edge; a URL feed) and its records printed
to stdout, one JSON object per line. An error response prints one object
with error_class, platform_code and message, and the exit status is 1.
Per-item errors (and notes such as "pagelist has no media") go to stderr as
JSON objects and do not stop the rest.
"""
from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import Any, Callable, Iterable, TextIO

from media_crawler.errors import CrawlError
from media_crawler.models import ItemError, MediaRecord
from media_crawler.platforms.base import FeedItem, PlatformSettings
from media_crawler.platforms.bilibili import normalize as bilibili
from media_crawler.platforms.bilibili.errors import classify_envelope
from media_crawler.platforms.bilibili.wbi import keys_from_nav
from media_crawler.platforms.facebook import normalize as facebook
from media_crawler.platforms.facebook.errors import classify_error, is_error_body
from media_crawler.platforms.fields import as_str, dig
from media_crawler.platforms.items import MALFORMED, guarded
from media_crawler.platforms.responses import parse_error
from media_crawler.platforms.urls.normalize import normalize_feed
from media_crawler.platforms.weibo import normalize as weibo
from media_crawler.platforms.weibo.errors import classify_body

Note = Callable[[dict], None]
_ENVELOPE_KEYS = {"error", "code", "ok"}  # Graph errors, Bilibili and Weibo envelopes


def run_normalize(
    platform: str,
    files: list[str],
    out: TextIO | None = None,
    err: TextIO | None = None,
    settings: PlatformSettings | None = None,
    now: datetime | None = None,
) -> int:
    """0 when every file normalized (per-item errors allowed), 1 when a file
    is an error response or cannot be read."""
    out, err = out or sys.stdout, err or sys.stderr
    settings = settings or PlatformSettings()
    if platform not in NORMALIZERS:
        print(json.dumps({"error_class": "parse_error", "platform_code": None,
                          "message": f"unknown platform {platform!r}"}), file=out)
        return 1
    status = 0
    for path in files:
        def note(info: dict, path: str = path) -> None:
            print(json.dumps({"file": path, **info}, ensure_ascii=False), file=err)

        try:
            bodies = _responses_in(_load(platform, path))
        except CrawlError as error:
            bodies, status = [], 1
            print(json.dumps({"file": path, **error.as_dict()}, ensure_ascii=False), file=out)
        for body in bodies:
            try:
                for item in NORMALIZERS[platform](body, settings, now, note):
                    if isinstance(item, MediaRecord):
                        print(item.to_json(), file=out)
                    else:
                        note({"error_class": item.error_class, "platform_code": item.platform_code,
                              "message": item.message, "item_id": item.item_id})
            except CrawlError as error:
                print(json.dumps({"file": path, **error.as_dict()}, ensure_ascii=False), file=out)
                status = 1
            except MALFORMED as exc:  # a response-level object (a view, a show) whose shape drifted
                drift = parse_error(platform, f"{path}: {exc}")
                print(json.dumps({"file": path, **drift.as_dict()}, ensure_ascii=False), file=out)
                status = 1
    return status


def _load(platform: str, path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError) as exc:
        raise parse_error(platform, f"cannot read {path}: {exc}") from None


def _responses_in(body: Any) -> list[Any]:
    """The saved responses a file holds: usually one; a list of envelopes
    (a collection of error examples) is several; a recorded exchange
    `{"status", "headers", "json"}` is its body."""
    if isinstance(body, list) and body and all(isinstance(b, dict) and _ENVELOPE_KEYS & b.keys() for b in body):
        return [_unwrap(b) for b in body]
    return [_unwrap(body)]


def _unwrap(body: Any) -> Any:
    return body["json"] if isinstance(body, dict) and "json" in body and "status" in body else body


def normalize_bilibili(body: Any, settings: PlatformSettings, now: datetime | None, note: Note) -> Iterable[FeedItem]:
    keys = keys_from_nav(body) if isinstance(body, dict) else None
    if keys is not None:  # nav answers -101 to anonymous clients, with the keys: normal
        note({"shape": "bilibili nav", "img_key": keys[0], "sub_key": keys[1]})
        return []
    error = classify_envelope(body)
    if error is not None:
        raise error
    data = body.get("data")
    if dig(data, "list", "vlist") is not None:
        return bilibili.covers_from_arc_search(data)
    if isinstance(data, dict) and (data.get("dash") is not None or data.get("durl") is not None):
        part = bilibili.VideoPart(as_str(data.get("bvid")) or "unknown", as_str(data.get("cid")) or "unknown")
        return guarded(bilibili.PLATFORM, part.item_id, lambda: bilibili.records_from_playurl(
            data, part, settings.max_height, settings.codec_order))
    if isinstance(data, dict) and data.get("bvid"):
        info = bilibili.video_info_from_view(data)
        note({"shape": "bilibili view", "parts": [p.item_id for p in info.parts]})
        return [bilibili.cover_record(info.bvid, info.cover_url, info.published_at, info.meta)] if info.cover_url else []
    if isinstance(data, list) and all(isinstance(page, dict) and "cid" in page for page in data):
        note({"shape": "bilibili pagelist", "cids": [str(page["cid"]) for page in data],
              "message": "pagelist lists parts, not media: playurl gives each part's streams"})
        return []
    raise parse_error(bilibili.PLATFORM, "unknown Bilibili response shape", json.dumps(body)[:4096])


def normalize_weibo(body: Any, settings: PlatformSettings, now: datetime | None, note: Note) -> Iterable[FeedItem]:
    if classify_body(body) == "end":
        note({"shape": "weibo end of list"})
        return []
    options = {"now": now, "max_height": settings.max_height}
    if dig(body, "data", "cards") is not None:
        return weibo.normalize_mblogs(weibo.mblogs_from_getindex(body), api="mobile", **options)
    if dig(body, "data", "list") is not None or dig(body, "statuses") is not None:
        return weibo.normalize_mblogs(weibo.mblogs_from_ajax(body), api="ajax", **options)
    mblog = weibo.mblog_from_show(body)
    if mblog is not None:
        api = "mobile" if mblog is body.get("data") else "ajax"
        return weibo.normalize_mblog(mblog, api=api, **options)
    raise parse_error("weibo", "unknown Weibo response shape", json.dumps(body, ensure_ascii=False)[:4096])


def normalize_facebook(body: Any, settings: PlatformSettings, now: datetime | None, note: Note) -> Iterable[FeedItem]:
    if is_error_body(body):
        raise classify_error(body)
    if isinstance(body, dict) and isinstance(body.get("data"), list):
        items: list[FeedItem] = []
        for node in body["data"]:
            items += _facebook_node(node)
        return items
    if isinstance(body, dict) and body.get("id"):
        return _facebook_node(body)
    raise parse_error(facebook.PLATFORM, "unknown Graph API response shape", json.dumps(body)[:4096])


def _facebook_node(node: Any) -> list[FeedItem]:
    if not isinstance(node, dict):
        return [ItemError(facebook.PLATFORM, "parse_error", "facebook: data[] entry is not an object")]
    is_video = "attachments" not in node and any(key in node for key in ("source", "format", "length"))
    return facebook.normalize_video_node(node) if is_video else facebook.normalize_post(node)


def normalize_urls(body: Any, settings: PlatformSettings, now: datetime | None, note: Note) -> Iterable[FeedItem]:
    return normalize_feed(body, feed_url="")


NORMALIZERS: dict[str, Callable[[Any, PlatformSettings, datetime | None, Note], Iterable[FeedItem]]] = {
    "bilibili": normalize_bilibili,
    "weibo": normalize_weibo,
    "facebook": normalize_facebook,
    "urls": normalize_urls,
}

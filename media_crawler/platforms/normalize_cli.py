"""`media-crawler normalize PLATFORM FILE...`: what a saved API response yields.

Each file's shape is detected (Bilibili arc/search, view, playurl, pagelist,
nav; Weibo getIndex, ajax mymblog / feed statuses, show; Facebook posts
page, single post, video node or edge; a URL feed) and its records printed
to stdout, one JSON object per line. An error response prints one object
with error_class, platform_code and message, and the exit status is 1.
Per-item errors (and notes such as "pagelist has no media") go to stderr as
JSON objects and do not stop the rest.

Files are decoded as the crawl decodes answers (safe_json): a file the crawl
would refuse (NaN, an overflowing number, nesting past the bound) prints a
parse_error line, never a traceback, and every line printed is valid UTF-8.
A Bilibili view answer given with playurl answers names their video: a
playurl alone is keyed `unknown:{cid}`, its cid read from the answer.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterable, TextIO

from media_crawler.errors import CrawlError
from media_crawler.models import ItemError, MediaRecord
from media_crawler.platforms.base import FeedItem, PlatformSettings
from media_crawler.platforms.bilibili import normalize as bilibili
from media_crawler.platforms.bilibili.errors import classify_envelope, envelope_code
from media_crawler.platforms.bilibili.wbi import keys_from_nav
from media_crawler.platforms.facebook import normalize as facebook
from media_crawler.platforms.facebook.errors import classify_error, is_error_body
from media_crawler.platforms.fields import as_str, dig
from media_crawler.platforms.items import MALFORMED, check_record, guarded
from media_crawler.platforms.responses import parse_error
from media_crawler.platforms.safe_json import clean_text, loads
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
    is an error response or cannot be read.

    The files are read first: a Bilibili view answer among them names the
    video (bvid, part number, title) of the playurl answers for its cids."""
    out, err = out or sys.stdout, err or sys.stderr
    settings = settings or PlatformSettings()
    if platform not in NORMALIZERS:
        _emit(out, {"error_class": "parse_error", "platform_code": None,
                    "message": f"unknown platform {clean_text(repr(platform))}"})
        return 1
    loaded: list[tuple[str, list[Any] | CrawlError]] = []
    for path in files:
        try:
            loaded.append((path, _responses_in(_load(platform, path))))
        except CrawlError as error:
            loaded.append((path, error))
    context = Context.of(platform, [body for _, bodies in loaded if isinstance(bodies, list) for body in bodies])
    status = 0
    for path, bodies in loaded:
        status |= normalize_bodies(platform, path, bodies, out, err, settings, now, context)
    return status


def normalize_text(
    platform: str,
    text: str | bytes,
    out: TextIO,
    err: TextIO,
    settings: PlatformSettings | None = None,
    now: datetime | None = None,
    where: str = "<text>",
) -> int:
    """`run_normalize` of one saved answer given as text (what a file would hold)."""
    try:
        bodies: list[Any] | CrawlError = _responses_in(_decode(platform, text, where))
    except CrawlError as error:
        bodies = error
    context = Context.of(platform, bodies if isinstance(bodies, list) else [])
    return normalize_bodies(platform, where, bodies, out, err, settings or PlatformSettings(), now, context)


def normalize_bodies(
    platform: str,
    path: str,
    bodies: list[Any] | CrawlError,
    out: TextIO,
    err: TextIO,
    settings: PlatformSettings,
    now: datetime | None,
    context: "Context",
) -> int:
    """Print what each saved answer of one file yields; 1 when one is an error."""
    shown = clean_text(path)

    def note(info: dict) -> None:
        _emit(err, {"file": shown, **info})

    if isinstance(bodies, CrawlError):
        _emit(out, {"file": shown, **bodies.as_dict()})
        return 1
    status = 0
    for body in bodies:
        try:
            for item in NORMALIZERS[platform](body, settings, now, note, context):
                if isinstance(item, MediaRecord):
                    print(clean_text(check_record(item).to_json()), file=out)
                else:
                    note({"error_class": item.error_class, "platform_code": item.platform_code,
                          "message": item.message, "item_id": item.item_id})
        except CrawlError as error:
            _emit(out, {"file": shown, **error.as_dict()})
            status = 1
        except MALFORMED as exc:  # a response-level object (a view, a show) whose shape drifted
            drift = parse_error(platform, f"{shown}: {exc}")
            _emit(out, {"file": shown, **drift.as_dict()})
            status = 1
    return status


def _emit(stream: TextIO, info: dict) -> None:
    print(clean_text(json.dumps(info, ensure_ascii=False, default=str)), file=stream)


def _load(platform: str, path: str) -> Any:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise parse_error(platform, f"cannot read {clean_text(path)}: {exc}") from None
    return _decode(platform, raw, path)


def _decode(platform: str, raw: str | bytes, where: str) -> Any:
    """The saved answer through the crawl's own decoder (safe_json): the same
    refusals (NaN, overflowing numbers, deep nesting) as an API answer."""
    try:
        return loads(raw)
    except (ValueError, TypeError) as exc:
        raise parse_error(platform, f"cannot read {clean_text(where)}: {exc}") from None


@dataclass
class Context:
    """What the files given together tell about each other: Bilibili parts by cid."""

    parts_by_cid: dict[str, bilibili.VideoPart] = field(default_factory=dict)

    @classmethod
    def of(cls, platform: str, bodies: Iterable[Any]) -> "Context":
        context = cls()
        if platform != "bilibili":
            return context
        for body in bodies:
            ok = isinstance(body, dict) and envelope_code(body.get("code")) == 0
            data = body.get("data") if ok else None
            if not isinstance(data, dict) or not data.get("bvid") or bilibili.is_playurl(data):
                continue
            try:
                info = bilibili.video_info_from_view(data)
            except MALFORMED:
                continue
            context.parts_by_cid.update((part.cid, part) for part in info.parts)
        return context


def _responses_in(body: Any) -> list[Any]:
    """The saved responses a file holds: usually one; a list of envelopes
    (a collection of error examples) is several; a recorded exchange
    `{"status", "headers", "json"}` is its body."""
    if isinstance(body, list) and body and all(isinstance(b, dict) and _ENVELOPE_KEYS & b.keys() for b in body):
        return [_unwrap(b) for b in body]
    return [_unwrap(body)]


def _unwrap(body: Any) -> Any:
    return body["json"] if isinstance(body, dict) and "json" in body and "status" in body else body


def normalize_bilibili(
    body: Any, settings: PlatformSettings, now: datetime | None, note: Note, context: Context | None = None
) -> Iterable[FeedItem]:
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
    if isinstance(data, dict) and bilibili.is_playurl(data):
        part = _playurl_part(data, context or Context(), note)
        return guarded(bilibili.PLATFORM, part.item_id, lambda: bilibili.records_from_playurl(
            data, part, settings.max_height, settings.codec_order))
    if isinstance(data, dict) and data.get("bvid"):
        try:
            info = bilibili.video_info_from_view(data)
        except MALFORMED as exc:  # the one object of the answer drifted: the answer's parse_error
            raise parse_error(bilibili.PLATFORM, f"view: {exc}", body) from None
        note({"shape": "bilibili view", "parts": [p.item_id for p in info.parts]})
        if not info.cover_url:
            return []
        return guarded(bilibili.PLATFORM, info.bvid, lambda: [
            bilibili.cover_record(info.bvid, info.cover_url, info.published_at, info.meta)])
    if isinstance(data, list) and all(isinstance(page, dict) and "cid" in page for page in data):
        note({"shape": "bilibili pagelist", "cids": [as_str(page["cid"]) for page in data],
              "message": "pagelist lists parts, not media: playurl gives each part's streams"})
        return []
    raise parse_error(bilibili.PLATFORM, "unknown Bilibili response shape", body)


def _playurl_part(data: dict, context: Context, note: Note) -> bilibili.VideoPart:
    """The part a playurl answer is for: its cid from the answer itself (the
    stream URLs name it), the bvid from a view answer given alongside."""
    cid = bilibili.playurl_cid(data)
    known = context.parts_by_cid.get(cid) if cid else None
    if known is not None:
        return known
    part = bilibili.VideoPart(as_str(data.get("bvid")) or "unknown", cid or "unknown")
    if part.bvid == "unknown":
        note({"shape": "bilibili playurl", "cid": cid,
              "message": "the answer does not name its video: give its view answer too for the bvid"})
    return part


def normalize_weibo(
    body: Any, settings: PlatformSettings, now: datetime | None, note: Note, context: Context | None = None
) -> Iterable[FeedItem]:
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
    raise parse_error("weibo", "unknown Weibo response shape", body)


def normalize_facebook(
    body: Any, settings: PlatformSettings, now: datetime | None, note: Note, context: Context | None = None
) -> Iterable[FeedItem]:
    if is_error_body(body):
        raise classify_error(body)
    if isinstance(body, dict) and isinstance(body.get("data"), list):
        items: list[FeedItem] = []
        for node in body["data"]:
            items += _facebook_node(node, note)
        return items
    if isinstance(body, dict) and body.get("id"):
        return _facebook_node(body, note)
    raise parse_error(facebook.PLATFORM, "unknown Graph API response shape", body)


def _facebook_node(node: Any, note: Note) -> list[FeedItem]:
    if not isinstance(node, dict):
        return [ItemError(facebook.PLATFORM, "parse_error", "facebook: data[] entry is not an object")]
    is_video = "attachments" not in node and any(key in node for key in ("source", "format", "length"))
    if is_video:
        return facebook.normalize_video_node(node)
    # A video the posts edge listed without `source` is no drift: the crawl
    # completes it from its own node (client.py `_video_from_node`).
    from_node = set(facebook.videos_missing_source(node))
    items = []
    for item in facebook.normalize_post(node):
        if isinstance(item, ItemError) and item.item_id in from_node:
            note({"shape": "facebook video without source", "item_id": item.item_id,
                  "message": f"the crawl takes its source from GET /{item.item_id}?fields={facebook.VIDEO_FIELDS}"})
        else:
            items.append(item)
    return items


def normalize_urls(
    body: Any, settings: PlatformSettings, now: datetime | None, note: Note, context: Context | None = None
) -> Iterable[FeedItem]:
    return normalize_feed(body, feed_url="")


NORMALIZERS: dict[str, Callable[[Any, PlatformSettings, datetime | None, Note, Context | None], Iterable[FeedItem]]] = {
    "bilibili": normalize_bilibili,
    "weibo": normalize_weibo,
    "facebook": normalize_facebook,
    "urls": normalize_urls,
}

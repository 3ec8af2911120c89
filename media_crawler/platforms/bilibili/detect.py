"""`media-crawler normalize bilibili`: arc/search, view, playurl, pagelist and nav answers."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

from media_crawler.platforms.base import FeedItem
from media_crawler.platform_spec import PlatformSettings
from media_crawler.platforms.bilibili import SPEC
from media_crawler.platforms.bilibili import normalize as bilibili
from media_crawler.platforms.bilibili.errors import classify_envelope, envelope_code
from media_crawler.platforms.bilibili.wbi import keys_from_nav
from media_crawler.platforms.detect import Context, Note
from media_crawler.platforms.fields import as_str, dig
from media_crawler.platforms.items import MALFORMED, guarded
from media_crawler.platforms.responses import parse_error


def context_of(bodies: Iterable[Any]) -> dict[str, bilibili.VideoPart]:
    """The video parts (by cid) that view answers among the files name."""
    parts: dict[str, bilibili.VideoPart] = {}
    for body in bodies:
        ok = isinstance(body, dict) and envelope_code(body.get("code")) == 0
        data = body.get("data") if ok else None
        if not isinstance(data, dict) or not names_video(data) or bilibili.is_playurl(data):
            continue
        try:
            info = bilibili.video_info_from_view(data)
        except MALFORMED:
            continue
        parts.update((part.cid, part) for part in info.parts)
    return parts


def normalize(
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
            data, part, SPEC.setting(settings, "max_height"), SPEC.setting(settings, "codec_order")))
    if isinstance(data, dict) and names_video(data):
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


def names_video(data: dict) -> bool:
    """A view answer: it names its video by bvid, or by aid alone (from before bvids)."""
    return bool(data.get("bvid")) or bilibili.video_bvid(data) is not None


def _playurl_part(data: dict, context: Context, note: Note) -> bilibili.VideoPart:
    """The part a playurl answer is for: its cid from the answer itself (the
    stream URLs name it), the bvid from a view answer given alongside."""
    cid = bilibili.playurl_cid(data)
    known = context.known.get(cid) if cid else None
    if known is not None:
        return known
    part = bilibili.VideoPart(bilibili.video_bvid(data) or "unknown", cid or "unknown")
    if part.bvid == "unknown":
        note({"shape": "bilibili playurl", "cid": cid,
              "message": "the answer does not name its video: give its view answer too for the bvid"})
    return part

"""Weibo posts → records, and the feed shapes that carry posts.

A post yields its pictures (and live-photo clips) and its video. A repost
yields the *original's* media under the original's identity (post_id, URL,
author), dated when the repost entered this feed; a repost of a deleted post
yields a not_found ItemError instead (a tombstone, never retried).
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Mapping

from media_crawler.errors import ErrorClass
from media_crawler.models import ItemError
from media_crawler.platforms.base import FeedItem
from media_crawler.platforms.fields import as_int, as_list, as_str, dig
from media_crawler.platforms.items import guarded
from media_crawler.platforms.weibo.images import post_picture_items
from media_crawler.platforms.weibo.posts import PLATFORM, is_tombstone, post_context, post_mid, post_time
from media_crawler.platforms.weibo.video import post_videos, video_record

MBLOG_CARD = 9  # getIndex: only card_type 9 carries an mblog


def normalize_mblog(
    mblog: Mapping[str, Any], now: datetime | None = None, max_height: int = 1080, api: str = "mobile"
) -> list[FeedItem]:
    """Every record (and per-item error) one feed post yields. A post whose
    shape drifted past what its pictures and videos isolate fails alone."""
    if not isinstance(mblog, Mapping):
        return [ItemError(PLATFORM, ErrorClass.PARSE_ERROR.value, "weibo: post is not an object")]
    mid = post_mid(mblog)
    if not mid:
        return [ItemError(PLATFORM, ErrorClass.PARSE_ERROR.value, "weibo: post without mid/id")]
    return guarded(PLATFORM, mid, lambda: _normalize_post(mblog, mid, now, max_height, api))


def _normalize_post(
    mblog: Mapping[str, Any], mid: str, now: datetime | None, max_height: int, api: str
) -> list[FeedItem]:
    published_at = post_time(mblog, now)
    items = _own_media(mblog, published_at, max_height, api, via=None)
    original = mblog.get("retweeted_status")
    if isinstance(original, Mapping):
        original_mid = post_mid(original)
        if is_tombstone(original):
            items.append(ItemError(
                PLATFORM, ErrorClass.NOT_FOUND.value,
                f"weibo: post {mid} reposts {original_mid or 'a post'} that was deleted", original_mid,
            ))
        elif not original_mid:
            items.append(ItemError(PLATFORM, ErrorClass.PARSE_ERROR.value, f"weibo: repost {mid} has an original without id", mid))
        else:
            items += _own_media(original, published_at, max_height, api, via=mblog)
    return items


def _own_media(
    mblog: Mapping[str, Any], published_at: datetime | None, max_height: int, api: str, via: Mapping[str, Any] | None
) -> list[FeedItem]:
    post = post_context(mblog, published_at, api, via)
    items = post_picture_items(mblog, post)
    for page_info in post_videos(mblog):
        items += guarded(PLATFORM, post.mid, lambda page_info=page_info: [video_record(page_info, post, max_height)])
    return items


def normalize_mblogs(
    mblogs: list[Mapping[str, Any]], now: datetime | None = None, max_height: int = 1080, api: str = "mobile"
) -> list[FeedItem]:
    items: list[FeedItem] = []
    for mblog in mblogs:
        items += normalize_mblog(mblog, now, max_height, api)
    return items


# -- feed shapes -----------------------------------------------------------------------

def mblogs_from_getindex(body: Any) -> list[Mapping[str, Any]]:
    """m.weibo.cn `api/container/getIndex`: `data.cards[]`, card_type 9 carries
    an mblog; some layouts nest cards in `card_group`."""
    mblogs = []
    for card in as_list(dig(body, "data", "cards")):
        cards = [card, *as_list(dig(card, "card_group"))]
        mblogs += [c["mblog"] for c in cards
                   if as_int(dig(c, "card_type")) == MBLOG_CARD and isinstance(dig(c, "mblog"), Mapping)]
    return mblogs


def getindex_next_params(body: Any) -> dict[str, str] | None:
    """The next page's cursor param: `since_id` (absent or 0 on the last page),
    or, on layouts that page by number, `page` + 1."""
    info = dig(body, "data", "cardlistInfo")
    since_id = as_str(dig(info, "since_id"))
    if since_id not in (None, "0"):
        return {"since_id": since_id}
    page = as_int(dig(info, "page"))
    return {"page": str(page + 1)} if page and 0 < page < 1_000_000 else None


def mblogs_from_ajax(body: Any) -> list[Mapping[str, Any]]:
    """weibo.com ajax lists: `data.list` (mymblog) or `statuses` (feed timelines)."""
    found = dig(body, "data", "list") or dig(body, "statuses") or dig(body, "data", "statuses")
    return [mblog for mblog in as_list(found) if isinstance(mblog, Mapping)]


def mblog_from_show(body: Any) -> Mapping[str, Any] | None:
    """One post: m. `statuses/show` wraps it in `data`, ajax `statuses/show` does not."""
    if isinstance(dig(body, "data"), Mapping) and post_mid(body["data"]):
        return body["data"]
    if isinstance(body, Mapping) and post_mid(body):
        return body
    return None

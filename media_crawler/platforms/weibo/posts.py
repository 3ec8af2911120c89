"""A Weibo post (`mblog`) as the normalizers see it: identity, canonical URL,
time, author, and the flags that change how the feed is walked."""
from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping

from media_crawler.platforms.fields import as_int, as_list, as_str, compact, dig, https_on
from media_crawler.platforms.weibo.dates import parse_created_at

PLATFORM = "weibo"
# The picture and video CDNs (the spec's media_hosts): both serve https.
MEDIA_HOSTS = ("sinaimg.cn", "weibocdn.com")
FEED_PICTURE_LIMIT = 9  # a feed entry lists at most 9 pictures; more need the detail
_TAG = re.compile(r"<[^>]+>")


@dataclass(frozen=True)
class PostContext:
    """Where a piece of media belongs: the post that owns it (the original,
    for a repost) and when it entered the crawled feed."""

    mid: str
    url: str
    published_at: datetime | None
    meta: Mapping[str, Any] = field(default_factory=dict)
    api: str = "mobile"  # which API re-resolves it: "mobile" (m.weibo.cn) or "ajax"

    @property
    def resolve_ref(self) -> str:
        return f"show:{self.api}:{self.mid}"


def media_url(url: str) -> str:
    """A picture, clip or video URL as fetched: https on Weibo's CDNs, else as served."""
    return https_on(url, MEDIA_HOSTS)


def post_mid(mblog: Mapping[str, Any]) -> str | None:
    if not isinstance(mblog, Mapping):
        return None
    return as_str(mblog.get("mid")) or as_str(mblog.get("idstr")) or as_str(mblog.get("id"))


def post_url(mblog: Mapping[str, Any]) -> str | None:
    """`https://weibo.com/{uid}/{mblogid}`; the m. status page when the author is unknown."""
    mid = post_mid(mblog)
    short_id = as_str(mblog.get("mblogid")) or as_str(mblog.get("bid")) or mid
    uid = as_str(dig(mblog, "user", "idstr")) or as_str(dig(mblog, "user", "id"))
    if uid and short_id:
        return f"https://weibo.com/{uid}/{short_id}"
    return f"https://m.weibo.cn/status/{short_id}" if short_id else None


def post_time(mblog: Mapping[str, Any], now: datetime | None = None) -> datetime | None:
    return parse_created_at(mblog.get("created_at"), now)


def post_text(mblog: Mapping[str, Any]) -> str | None:
    """Plain text: ajax `text_raw`, m. `raw_text`, else `text` without its HTML."""
    raw = as_str(mblog.get("text_raw")) or as_str(mblog.get("raw_text"))
    if raw:
        return raw
    text = as_str(mblog.get("text"))
    if not text:
        return None
    return html.unescape(_TAG.sub("", text)).strip() or None


def post_context(
    mblog: Mapping[str, Any], published_at: datetime | None, api: str, via: Mapping[str, Any] | None = None
) -> PostContext:
    """`via` is the repost that carried this post into the feed, if any."""
    mid = post_mid(mblog) or ""
    url = post_url(mblog) or ""
    meta = compact(
        text=post_text(mblog),
        author_id=as_str(dig(mblog, "user", "idstr")) or as_str(dig(mblog, "user", "id")),
        author_name=as_str(dig(mblog, "user", "screen_name")),
        post_id=mid,
        post_url=url,
        via_post_id=post_mid(via) if via else None,
        via_post_url=post_url(via) if via else None,
    )
    return PostContext(mid, url, published_at, meta, api)


def is_tombstone(mblog: Mapping[str, Any]) -> bool:
    """A repost of a deleted or hidden post: `{deleted: "1"}` and no content."""
    return as_str(mblog.get("deleted")) == "1"


def is_pinned(mblog: Mapping[str, Any]) -> bool:
    """Pinned posts head the first page whatever their age, so they must not
    decide where the feed's time order ends."""
    return as_int(mblog.get("isTop")) == 1


def picture_count(mblog: Mapping[str, Any]) -> int:
    listed = len(as_list(mblog.get("pics")) or as_list(mblog.get("pic_ids")))
    return max(as_int(mblog.get("pic_num")) or 0, listed)


def needs_detail(mblog: Mapping[str, Any]) -> bool:
    """The feed entry is abridged: more than 9 pictures, or long text."""
    return picture_count(mblog) > FEED_PICTURE_LIMIT or bool(mblog.get("isLongText"))

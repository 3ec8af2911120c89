"""Graph API posts and video nodes → MediaRecords.

Photos: `target.id`/`image` (the post id + index when the target is missing);
videos: `target.id`/`source`, re-resolved through the video node; albums
contribute one record per sub-attachment. Links, shares and events are
previews of other sites' content, not the page's media, and are skipped.
Every fbcdn URL is signed (`oh=`, `oe=`) and expires.
"""
from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Iterator, Mapping

from media_crawler.errors import ErrorClass
from media_crawler.models import ItemError, MediaRecord
from media_crawler.platforms.base import FeedItem
from media_crawler.platforms.fields import (
    as_float, as_int, as_list, as_str, compact, dig, https_on, parse_iso, require,
)
from media_crawler.platforms.items import guarded

PLATFORM = "facebook"
SITE = "https://www.facebook.com"
ATTACHMENT_FIELDS = "attachments{media_type,type,media,target,url,title,subattachments}"
POST_FIELDS = f"id,created_time,message,permalink_url,from,{ATTACHMENT_FIELDS}"
VIDEO_FIELDS = "source,permalink_url,length,format"
# The /{page-id}/videos edge: `source` is asked for, but Graph leaves it out of edge
# entries it will not sign there (the crawl then asks the video's own node).
VIDEO_EDGE_FIELDS = "id,created_time,title,description,length,permalink_url,source"
VIDEO_TYPES = frozenset({"video", "video_inline", "video_autoplay", "video_share_youtube_inline", "animated_image_video"})
PHOTO_TYPES = frozenset({"photo", "cover_photo", "profile_media", "album"})
MEDIA_HOSTS = ("fbcdn.net",)
# Object ids taken from an answer become URL paths sent with the token: only ids shaped
# like Graph's (`1885259812583763`, `568848472421323_6336370013444574`) are ever requested.
_GRAPH_ID = re.compile(r"\d{1,40}(?:_\d{1,40})?")
MAX_ALBUM_NESTING = 8  # albums nest sub-attachments one level deep; deeper is not media we know


def post_published_at(post: Mapping[str, Any]) -> datetime | None:
    return parse_iso(post.get("created_time"))


def site_url(value: Any) -> str | None:
    """Absolute URL; Graph gives video permalinks as `/page/videos/id/`."""
    text = as_str(value)
    if not text:
        return None
    if text.startswith("/"):
        return SITE + text
    return text if text.startswith(("http://", "https://")) else None


def normalize_post(post: Mapping[str, Any]) -> list[FeedItem]:
    if not isinstance(post, Mapping):
        return [ItemError(PLATFORM, ErrorClass.PARSE_ERROR.value, "facebook: post is not an object")]
    post_id = as_str(post.get("id"))
    if not post_id:
        return [ItemError(PLATFORM, ErrorClass.PARSE_ERROR.value, "facebook: post without id")]
    meta = compact(
        text=as_str(post.get("message")),
        author_id=as_str(dig(post, "from", "id")) or post_id.split("_", 1)[0],
        author_name=as_str(dig(post, "from", "name")),
        post_id=post_id,
        post_url=site_url(post.get("permalink_url")),
    )
    published_at = post_published_at(post)
    items: list[FeedItem] = []
    for index, attachment in enumerate(media_attachments(post), start=1):
        fallback_id = f"{post_id}:{index}"
        items += guarded(
            PLATFORM, as_str(dig(attachment, "target", "id")) or fallback_id,
            lambda a=attachment, f=fallback_id: [attachment_record(a, f, published_at, meta)],
        )
    return items


def media_attachments(post: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Photo and video attachments in order; albums unfold into their sub-attachments."""
    for attachment in as_list(dig(post, "attachments", "data")):
        yield from _unfold(attachment)


def _unfold(attachment: Any) -> Iterator[Mapping[str, Any]]:
    """The media of an attachment in order, depth-first, without recursion."""
    stack = [(attachment, 0)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, Mapping):
            continue
        subattachments = as_list(dig(node, "subattachments", "data"))
        if subattachments:
            if depth < MAX_ALBUM_NESTING:
                stack.extend((sub, depth + 1) for sub in reversed(subattachments))
        elif attachment_kind(node):
            yield node


def attachment_kind(attachment: Mapping[str, Any]) -> str | None:
    kinds = {as_str(attachment.get("media_type")), as_str(attachment.get("type"))}
    if kinds & VIDEO_TYPES or dig(attachment, "media", "source"):
        return "video"
    if kinds & PHOTO_TYPES:
        return "image"
    return None


def attachment_record(
    attachment: Mapping[str, Any], fallback_id: str, published_at: datetime | None, post_meta: Mapping[str, Any]
) -> MediaRecord:
    target_id = as_str(dig(attachment, "target", "id"))
    item_id = target_id or fallback_id
    canonical = (
        site_url(dig(attachment, "target", "url")) or site_url(attachment.get("url"))
        or f"{post_meta.get('post_url') or SITE}#{item_id}"
    )
    title = as_str(attachment.get("title"))
    if attachment_kind(attachment) == "video":
        url = https_on(require(as_str(dig(attachment, "media", "source")), f"attachment {item_id} media.source"),
                       MEDIA_HOSTS)
        return MediaRecord(
            platform=PLATFORM, item_id=item_id, variant="source", kind="video", canonical_url=canonical,
            media_url=url, published_at=published_at,
            resolve_ref=f"video:{target_id}" if target_id else f"post:{post_meta['post_id']}",
            meta={**post_meta, **compact(title=title)},
        )
    image = dig(attachment, "media", "image")
    url = https_on(require(as_str(dig(image, "src")), f"attachment {item_id} media.image.src"), MEDIA_HOSTS)
    return MediaRecord(
        platform=PLATFORM, item_id=item_id, variant="image", kind="image", canonical_url=canonical,
        media_url=url, published_at=published_at,
        resolve_ref=f"post:{post_meta['post_id']}",  # photos have no source edge: refetch the post
        meta={**post_meta, **compact(title=title, width=as_int(dig(image, "width")), height=as_int(dig(image, "height")))},
    )


def is_graph_id(value: str) -> bool:
    return bool(_GRAPH_ID.fullmatch(value))


def videos_missing_source(post: Mapping[str, Any]) -> list[str]:
    """Target ids of video attachments the posts edge answered without `source`
    (the crawl asks each one's node for it)."""
    return [
        target_id for attachment in media_attachments(post)
        if attachment_kind(attachment) == "video" and not as_str(dig(attachment, "media", "source"))
        and (target_id := as_str(dig(attachment, "target", "id"))) and is_graph_id(target_id)
    ]


def is_video_entry(node: Any) -> bool:
    """A video node or /videos edge entry (not a post: no attachments, video fields)."""
    return (isinstance(node, Mapping) and "attachments" not in node
            and any(key in node for key in ("source", "format", "length")))


def video_entry_missing_source(node: Any) -> str | None:
    """The id of a video entry answered without `source` (its own node may have it)."""
    if not is_video_entry(node) or as_str(node.get("source")):
        return None
    video_id = as_str(node.get("id"))
    return video_id if video_id and is_graph_id(video_id) else None


def normalize_video_node(node: Mapping[str, Any]) -> list[FeedItem]:
    """`GET /{video-id}?fields=source,...` (and the /videos edge) → one record."""
    if not isinstance(node, Mapping):
        return [ItemError(PLATFORM, ErrorClass.PARSE_ERROR.value, "facebook: video node is not an object")]
    video_id = as_str(node.get("id"))
    return guarded(PLATFORM, video_id, lambda: [video_node_record(node)])


def video_node_record(node: Mapping[str, Any], video_id: str | None = None) -> MediaRecord:
    video_id = require(video_id or as_str(node.get("id")), "video id")
    url = https_on(require(as_str(node.get("source")), f"video {video_id} source"), MEDIA_HOSTS)
    meta = compact(
        title=as_str(node.get("title")),
        text=as_str(node.get("description")),
        author_id=as_str(dig(node, "from", "id")),
        author_name=as_str(dig(node, "from", "name")),
        duration=as_float(node.get("length")),
        post_url=site_url(node.get("permalink_url")),
    )
    return MediaRecord(
        platform=PLATFORM, item_id=video_id, variant="source", kind="video",
        canonical_url=site_url(node.get("permalink_url")) or f"{SITE}/{video_id}",
        media_url=url, published_at=parse_iso(node.get("created_time")), resolve_ref=f"video:{video_id}", meta=meta,
    )


def next_page_url(body: Any) -> str | None:
    return as_str(dig(body, "paging", "next"))

"""`media-crawler normalize facebook`: a posts page, a single post, a video node or edge."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

from media_crawler.models import ItemError
from media_crawler.platforms.base import FeedItem
from media_crawler.platform_spec import PlatformSettings
from media_crawler.platforms.detect import Context, Note
from media_crawler.platforms.facebook import normalize as facebook
from media_crawler.platforms.facebook.errors import classify_error, is_error_body
from media_crawler.platforms.responses import parse_error


def normalize(
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
    if facebook.is_video_entry(node):
        video_id = facebook.video_entry_missing_source(node)
        if video_id is None:
            return facebook.normalize_video_node(node)
        # A /videos entry (or a node fetched without `source`) is no drift either: the
        # crawl asks the video's node, and Graph may sign no source for it at all.
        note({"shape": "facebook video without source", "item_id": video_id,
              "message": f"the crawl takes its source from GET /{video_id}?fields={facebook.VIDEO_FIELDS}"})
        return []
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

"""`media-crawler normalize urls`: a URL feed."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

from media_crawler.platforms.base import FeedItem
from media_crawler.platform_spec import PlatformSettings
from media_crawler.platforms.detect import Context, Note
from media_crawler.platforms.urls.normalize import classify_feed, normalize_feed


def normalize(
    body: Any, settings: PlatformSettings, now: datetime | None, note: Note, context: Context | None = None
) -> Iterable[FeedItem]:
    error = classify_feed(body)  # what the crawl refuses: a feed is an object or a list
    if error is not None:
        raise error
    return normalize_feed(body, feed_url="")

"""`media-crawler normalize urls`: a URL feed."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

from media_crawler.platforms.base import FeedItem, PlatformSettings
from media_crawler.platforms.detect import Context, Note
from media_crawler.platforms.urls.normalize import normalize_feed


def normalize(
    body: Any, settings: PlatformSettings, now: datetime | None, note: Note, context: Context | None = None
) -> Iterable[FeedItem]:
    return normalize_feed(body, feed_url="")

"""The example API's answers → records: pure functions of a decoded body.

An album page: `{"status": "ok", "album": "7", "photos": [{"id", "url", "taken_at",
"sha256", "size", "title"}], "next_page": 2 | null}`. An error: `{"status": "error",
"code": "throttled" | "gone" | "denied" | ..., "message": "..."}`; the table below
decides what each code means (data, not branches).
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.models import MediaRecord
from media_crawler.platforms.base import FeedItem
from media_crawler.platform_spec import PlatformSettings
from media_crawler.platforms.fields import as_list, as_size, as_str, compact, parse_iso, require
from media_crawler.platforms.items import guarded
from media_crawler.platforms.responses import parse_error

PLATFORM = "example"
ERROR_CLASSES = {
    "throttled": ErrorClass.RATE_LIMITED,
    "gone": ErrorClass.NOT_FOUND,
    "denied": ErrorClass.AUTH,
    "busy": ErrorClass.HTTP_5XX,
}


def classify(body: Any) -> CrawlError | None:
    """The CrawlError an answer stands for; None for an ok page."""
    if not isinstance(body, dict):
        return parse_error(PLATFORM, "answer is not a JSON object", body)
    status = as_str(body.get("status"))
    if status == "ok":
        return None
    if status == "error":
        code = as_str(body.get("code")) or "unknown"
        error_class = ERROR_CLASSES.get(code)
        if error_class is not None:
            return CrawlError(error_class, f"{PLATFORM}: {code}: {as_str(body.get('message')) or ''}".strip(),
                              platform_code=code)
    return parse_error(PLATFORM, f"unexpected answer status={status!r}", body)


def photo_record(album: str, photo: Any) -> MediaRecord:
    photo_id = require(as_str(photo.get("id")), "photo id")
    return MediaRecord(
        platform=PLATFORM,
        item_id=f"{album}:{photo_id}",
        variant="original",
        kind="image",
        canonical_url=f"https://example.test/albums/{album}/{photo_id}#original",
        media_url=require(as_str(photo.get("url")), "photo url"),
        published_at=parse_iso(photo.get("taken_at")),
        expected_sha256=as_str(photo.get("sha256")),
        expected_size=as_size(photo.get("size")),
        meta=compact(title=as_str(photo.get("title")), post_id=photo_id),
    )


def records_from_page(body: Any) -> list[FeedItem]:
    """Every photo of an ok album page (a malformed photo is a per-item error)."""
    error = classify(body)
    if error is not None:
        raise error
    album = as_str(body.get("album")) or "unknown"
    items: list[FeedItem] = []
    for photo in as_list(body.get("photos")):
        photo_id = as_str(photo.get("id")) if isinstance(photo, dict) else None
        items += guarded(PLATFORM, photo_id, lambda photo=photo: [photo_record(album, photo)])
    return items


def detect(body: Any, settings: PlatformSettings, now: datetime | None, note, context=None) -> Iterable[FeedItem]:
    """`media-crawler normalize example`: an album page (the only shape this API has)."""
    if isinstance(body, dict) and "photos" not in body and body.get("status") == "ok":
        note({"shape": "example album without photos"})
        return []
    return records_from_page(body)

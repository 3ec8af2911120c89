"""URL-list feeds → records: `{"items": [{"url", "sha256", "size", ...}]}`.

The only platform without ids of its own: an item is its `sha256` when the
feed gives one (the same file listed at two URLs is one item), else the
sha256 of its URL without signature parameters (scrub.identity_url). Optional per item: `type`/`kind` (image|video|audio or a
MIME type), `published_at` (ISO 8601 or unix seconds), `title`.
"""
from __future__ import annotations

import hashlib
import mimetypes
import re
from datetime import datetime
from collections.abc import Mapping  # not typing's: its isinstance check costs several times more
from typing import Any
from urllib.parse import urlsplit

from media_crawler.errors import CrawlError
from media_crawler.models import KINDS, MediaRecord
from media_crawler.net.targets import join_reference
from media_crawler.platforms.base import FeedItem
from media_crawler.platforms.fields import (
    MissingField, as_list, as_size, as_str, compact, from_unix, parse_iso, require,
)
from media_crawler.platforms.items import MALFORMED, check_record, item_failure
from media_crawler.scrub import excerpt, identity_url, scrub_url

PLATFORM = "urls"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# Extensions mimetypes does not know everywhere (DASH segments, modern images).
EXTRA_KINDS = {".m4s": "video", ".ts": "video", ".flv": "video", ".mkv": "video", ".webp": "image",
               ".avif": "image", ".heic": "image", ".m4a": "audio", ".opus": "audio", ".flac": "audio"}
DEFAULT_KIND = "image"


def feed_items(body: Any) -> list[Any]:
    """The feed's entries: `{"items": [...]}` or a bare list."""
    return as_list(body.get("items")) if isinstance(body, Mapping) else as_list(body)


def classify_feed(body: Any) -> CrawlError | None:
    """The error a decoded feed answer stands for: a feed is an object or a list
    (HTTP statuses are the shared floor, platforms/responses.py)."""
    if not isinstance(body, (dict, list)):
        from media_crawler.platforms.responses import parse_error

        return parse_error(PLATFORM, "the feed is neither an object nor a list", body)
    return None


def next_feed_url(body: Any, feed_url: str) -> str | None:
    """An optional `next` link for paged feeds, relative to the feed."""
    next_url = as_str(body.get("next")) if isinstance(body, Mapping) else None
    return item_url(feed_url, next_url) if next_url else None


def item_published_at(item: Any) -> datetime | None:
    return _published_at(item) if isinstance(item, Mapping) else None


def _published_at(item: Mapping[str, Any]) -> datetime | None:
    for name in ("published_at", "date", "created_at", "time"):
        value = item.get(name)
        if value is None:  # the usual case, an undated item: no parse to try
            continue
        moment = parse_iso(value) if isinstance(value, str) and not value.isdigit() else from_unix(value)
        if moment is not None:
            return moment
    return None


def guess_kind(url: str, declared: Any = None) -> str:
    """`type`/`kind` when it names a kind or a MIME type, else the URL's extension."""
    text = (as_str(declared) or "").lower()
    if text in KINDS:
        return text
    if text.split("/", 1)[0] in KINDS:
        return text.split("/", 1)[0]
    try:
        path = urlsplit(url).path.lower()
    except ValueError:  # a malformed host (`http://[]`): the download refuses it; the kind is a guess
        return DEFAULT_KIND
    suffix = path[path.rfind("."):] if "." in path.rsplit("/", 1)[-1] else ""
    if suffix in EXTRA_KINDS:
        return EXTRA_KINDS[suffix]
    mime, _ = mimetypes.guess_type(path)
    major = (mime or "").split("/", 1)[0]
    return major if major in KINDS else DEFAULT_KIND


def item_url(feed_url: str, listed: str) -> str:
    """The item's absolute URL (net/targets.py `join_reference`: only a relative
    reference is joined to the feed, so `http:` or `http://?` stays the broken URL it
    is and the download refuses it as disallowed_url, instead of becoming the feed's
    own URL). A reference that cannot be joined at all is kept as written, for the
    download to refuse with the same class and the ledger row to say so."""
    try:
        return join_reference(feed_url, listed)
    except CrawlError:
        return listed


def item_record(item: Mapping[str, Any], feed_url: str) -> MediaRecord:
    url = item_url(feed_url, require(as_str(item.get("url")), "items[].url"))
    sha256 = as_str(item.get("sha256"))
    if sha256 is not None:
        sha256 = sha256.lower()
        if not _SHA256.match(sha256):
            raise MissingField(f"items[].sha256 {excerpt(repr(sha256), 18)} is not a sha256 hex digest")
    title, page_url = item.get("title"), item.get("page_url")
    return MediaRecord(
        platform=PLATFORM,
        # A re-signed URL is the same file: its signature parameters are no part of its identity.
        item_id=sha256 or hashlib.sha256(identity_url(url).encode()).hexdigest(),
        variant="file",
        kind=guess_kind(url, item.get("type") or item.get("kind")),
        canonical_url=scrub_url(url),  # a signed feed URL must not become a logged identity
        media_url=url,
        published_at=_published_at(item),  # (`item` answered .get: a Mapping, or a failed item already)
        expected_sha256=sha256,
        expected_size=as_size(item.get("size")),
        # Most feeds give neither: no keyword call to make an empty dict of two Nones.
        meta={} if title is None and page_url is None else compact(title=as_str(title), post_url=as_str(page_url)),
    )


def normalize_feed(body: Any, feed_url: str) -> list[FeedItem]:
    return [feed_item(item, feed_url) for item in feed_items(body)]


def feed_item(item: Any, feed_url: str) -> FeedItem:
    """The item's checked record, or its ItemError: items.guarded for a one-record item,
    the URL the ItemError names worked out only when there is one (scrubbing and cutting
    every item's URL up front was a fifth of a feed's normalisation)."""
    try:
        return check_record(item_record(item, feed_url))
    except (CrawlError, *MALFORMED) as exc:
        url = as_str(item.get("url")) if isinstance(item, Mapping) else None
        return item_failure(PLATFORM, _shown(url), exc)


def _shown(url: str | None) -> str | None:
    """The item's URL as an ItemError names it: scrubbed, and short enough to log."""
    if not url:
        return None
    try:
        return excerpt(scrub_url(url), 500)
    except ValueError:  # pragma: no cover - scrub_url keeps what it cannot parse
        return None

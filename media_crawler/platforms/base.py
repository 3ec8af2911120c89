"""The seam between the pipeline and a platform.

An adapter turns a Source and a DayWindow into MediaRecords by paging the
platform's API through an ApiTransport, and knows how to re-resolve a signed
media URL and which headers its CDN wants. Normalizers (pure functions of a
decoded response) live beside each client so they can be tested on fixtures and
used by `media-crawler normalize`.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Iterator, Mapping, Protocol

from media_crawler.models import DayWindow, ItemError, MediaRecord, Source
from media_crawler.platform_spec import PlatformSettings


@dataclass(frozen=True)
class ApiResponse:
    """An API answer as an adapter reads it: status, headers, the decoded text and its URL."""

    status: int
    headers: Mapping[str, str]
    text: str
    url: str  # already scrubbed of secrets: safe to log

    def json(self) -> Any:
        """The body through the platforms' one decoder (safe_json: NaN, overflowing
        numbers and deep nesting refused as ValueError, strings valid UTF-8)."""
        from media_crawler.platforms.safe_json import loads

        return loads(self.text)


class ApiTransport(Protocol):
    """Issues one API GET. Implementations own sessions, timeouts and the rate
    budget; network failures surface as CrawlError(network_timeout/connection_reset).
    HTTP error statuses are returned, not raised: the adapter classifies them,
    because platforms hide errors in 200 bodies and in 4xx bodies alike."""

    def get(
        self, platform: str, url: str, *, params: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None
    ) -> ApiResponse: ...


class PlatformAdapter(ABC):
    name: ClassVar[str]
    default_api_base: ClassVar[str]
    # Seconds a media URL stays valid after resolution; None: does not expire.
    url_lifetime_s: ClassVar[float | None] = None

    def __init__(self, settings: PlatformSettings, transport: ApiTransport) -> None:
        self.settings = settings
        self.transport = transport

    @property
    def api_base(self) -> str:
        return (self.settings.api_base or self.default_api_base).rstrip("/")

    @abstractmethod
    def iter_records(
        self, source: Source, window: DayWindow, cursors: "CursorStore | None" = None
    ) -> Iterator[MediaRecord | ItemError]:
        """Page the source's feed, yield the window's records (and per-item
        errors); stop paging at the first page older than the window. Raises
        CrawlError for a page-level failure (rate limit, auth, parse error)."""

    def resolve(self, record: MediaRecord) -> MediaRecord:
        """A record with a fresh media_url (called when the URL is older than
        url_lifetime_s or the CDN answered 403). Default: unchanged."""
        return record

    def url_lifetime_for(self, record: MediaRecord) -> float | None:
        """Seconds this record's media_url stays valid; None: it does not expire.

        Per record because one platform mixes both: Weibo pictures are stable,
        its video URLs are signed. A record without resolve_ref cannot be
        refreshed, so its URL is treated as stable.
        """
        return self.url_lifetime_s if record.resolve_ref else None

    def download_headers(self, record: MediaRecord) -> dict[str, str]:
        """Headers the CDN requires (Referer, User-Agent, cookies from env)."""
        return {}


class CursorStore(Protocol):
    """Per-source incremental cursors, persisted in the ledger."""

    def get_cursor(self, source_key: str, name: str) -> str | None: ...

    def set_cursor(self, source_key: str, name: str, value: str) -> None: ...


FeedItem = MediaRecord | ItemError

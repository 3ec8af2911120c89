"""Incremental paging against a day window.

Feeds come newest-first. An item newer than the window is skipped and paging
goes on; the first page whose oldest dated item is older than the window's
start is the last one read, so a daily partition costs a few pages, not the
account's whole history.
"""
from __future__ import annotations

from datetime import datetime
from typing import Iterable

from media_crawler.models import DayWindow, iso_utc
from media_crawler.platforms.base import CursorStore
from media_crawler.platform_spec import PlatformSettings

DEFAULT_MAX_PAGES = 500  # a server that never stops paging must not hold a run forever


def max_pages(settings: PlatformSettings) -> int:
    """`platforms: {<p>: {max_pages: N}}` in sources.yaml, else DEFAULT_MAX_PAGES."""
    return int(settings.options.get("max_pages", DEFAULT_MAX_PAGES))


def page_reaches_before(window: DayWindow, moments: Iterable[datetime | None]) -> bool:
    """True when the page's oldest dated item is older than the window: stop after it."""
    dated = [moment for moment in moments if moment is not None]
    return bool(dated) and min(dated) < window.start


class NewestSeen:
    """Tracks the newest publication time seen for a source and stores it as
    the `newest` cursor (ISO, UTC) when the walk finishes; a later run or a
    status report can tell how fresh the archive is without reading records."""

    CURSOR = "newest"

    def __init__(self, cursors: CursorStore | None, source_key: str) -> None:
        self.cursors = cursors
        self.source_key = source_key
        self.newest: datetime | None = None

    def observe(self, moment: datetime | None) -> None:
        if moment is not None and (self.newest is None or moment > self.newest):
            self.newest = moment

    def save(self) -> None:
        if self.cursors is None or self.newest is None:
            return
        stored = self.cursors.get_cursor(self.source_key, self.CURSOR)
        if stored is None or stored < iso_utc(self.newest):  # same ISO-Z format: text order is time order
            self.cursors.set_cursor(self.source_key, self.CURSOR, iso_utc(self.newest))

"""The example adapter: page an album, newest photos first, stop past the window."""
from __future__ import annotations

from typing import Iterator

from media_crawler.models import DayWindow, MediaRecord, Source
from media_crawler.platforms.base import CursorStore, FeedItem, PlatformAdapter
from media_crawler.platforms.responses import decode_json, http_status_error
from media_crawler.platforms.window import NewestSeen, max_pages, page_reaches_before
from media_crawler_tests.fourth_platform.normalize import PLATFORM, classify, records_from_page


class ExampleAdapter(PlatformAdapter):
    name = PLATFORM
    default_api_base = "https://api.example.test"
    url_lifetime_s = None

    def iter_records(self, source: Source, window: DayWindow, cursors: CursorStore | None = None) -> Iterator[FeedItem]:
        newest = NewestSeen(cursors, source.key)
        page = 1
        for _ in range(max_pages(self.settings)):
            response = self.transport.get(PLATFORM, f"{self.api_base}/albums/{source.ident}",
                                          params={"page": page, "per_page": self.settings.options.get("page_size", 3)})
            error = http_status_error(PLATFORM, response)
            body = decode_json(PLATFORM, response) if error is None else None
            error = error or classify(body)
            if error is not None:
                raise error
            items = records_from_page(body)
            moments = []
            for item in items:
                if isinstance(item, MediaRecord):
                    newest.observe(item.published_at)
                    moments.append(item.published_at)
                    if not window.contains(item.published_at):
                        continue
                yield item
            if not body.get("next_page") or page_reaches_before(window, moments):
                break
            page = int(body["next_page"])
        newest.save()

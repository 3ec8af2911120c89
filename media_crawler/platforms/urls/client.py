"""The URL-list adapter: read a JSON feed of media URLs (following an
optional `next` link) and yield its items for the window.

Feed items are often undated. A dated item is yielded only for its day; an
undated one for every window, which is harmless: the ledger's unique key
(platform, item_id, variant) admits it once and later windows skip it.
"""
from __future__ import annotations

from typing import Any, Iterator

from media_crawler.models import DayWindow, MediaRecord, Source
from media_crawler.platforms.base import CursorStore, FeedItem, PlatformAdapter
from media_crawler.platforms.responses import decode_json, http_status_error, parse_error
from media_crawler.platforms.urls.normalize import PLATFORM, next_feed_url, normalize_feed
from media_crawler.platforms.window import NewestSeen, max_pages


class UrlsAdapter(PlatformAdapter):
    name = "urls"
    default_api_base = ""  # each source names its own feed URL
    # Any public host (the spec's media_hosts "*", pipeline/runtime.py `media_policy`);
    # an internal one, the feed's own included, only when `allow_hosts` lists it with its port.
    url_lifetime_s = None

    def iter_records(
        self, source: Source, window: DayWindow, cursors: CursorStore | None = None
    ) -> Iterator[FeedItem]:
        newest = NewestSeen(cursors, source.key)
        feed_url: str | None = source.ident
        visited: set[str] = set()
        for _ in range(max_pages(self.settings)):
            if not feed_url or feed_url in visited:
                break
            visited.add(feed_url)
            body = self._get(feed_url)
            for item in normalize_feed(body, feed_url):
                if isinstance(item, MediaRecord):
                    newest.observe(item.published_at)
                    if item.published_at is not None and not window.contains(item.published_at):
                        continue
                yield item
            feed_url = next_feed_url(body, feed_url)
        newest.save()

    def _get(self, feed_url: str) -> Any:
        response = self.transport.get(PLATFORM, feed_url)
        error = http_status_error(PLATFORM, response)
        if error is not None:
            raise error
        body = decode_json(PLATFORM, response)
        if not isinstance(body, (dict, list)):
            raise parse_error(PLATFORM, f"feed {response.url} is neither an object nor a list", response.text)
        return body

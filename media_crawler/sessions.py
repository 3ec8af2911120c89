"""A runtime's HTTP: a pooled requests.Session for the API path, carrying `media`,
the media path's urllib3 transport (download/media_transport.py).

Both have urllib3's own retries switched off (http.NO_RETRIES), and their connections
dial only addresses the URL policy in force admitted (net/pinning.py): a request made
outside `under_policy` is refused. This module sits above download/ (it builds the
media transport) and http.py below it, so neither imports the other's way back; the
download engine takes anything carrying `.media` (media_transport.CarriesMedia).
"""
from __future__ import annotations

import requests
from requests.adapters import HTTPAdapter

from media_crawler.download.media_transport import MediaTransport
from media_crawler.http import NO_RETRIES
from media_crawler.net.pinning import PINNED_POOL_CLASSES


class PinnedAdapter(HTTPAdapter):
    """requests' adapter (its public extension point) with the pinned pools of
    net/pinning.py, for the API path."""

    def init_poolmanager(self, *args, **kwargs) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = dict(PINNED_POOL_CLASSES)


class CrawlerSession(requests.Session):
    """The API path's Session, carrying `media`, the media path's transport: one
    runtime holds one of each, and closing the session closes both."""

    def __init__(self, media: "MediaTransport") -> None:
        super().__init__()
        self.media = media

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.media.close()


def make_session(pool_size: int = 16, media: MediaTransport | None = None) -> CrawlerSession:
    """A session whose connection pools (API and media) fit `pool_size` concurrent workers;
    `media`: the media transport it carries, when one is already made (pipeline/runtime.py)."""
    session = CrawlerSession(media if media is not None else MediaTransport(pool_size))
    adapter = PinnedAdapter(pool_connections=pool_size, pool_maxsize=pool_size, max_retries=NO_RETRIES)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session

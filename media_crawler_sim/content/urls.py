"""URL-list feeds (`{"items":[{"url","sha256","size"}]}`): the demo feed and two fault feeds.

- demo.json: 8 images (JPEG and PNG, 64x48 up to 800x600) and one MP4, all well-behaved;
- html.json: two good JPEGs and one URL that answers `200 text/html` (a login page)
  instead of the JPEG its entry promises;
- errors.json: one URL per failure: 404 and 500 forever, 429 + Retry-After: 1 once
  then OK, a body cut mid-stream once then OK.
Fault feeds still list the sha256/size of the file the entry promises, so a crawler
can tell a wrong body from a right one. URL-list files have no platform id: the
truth names them by their sha256 (as the crawler does when the feed announces it).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from media_crawler_sim import faults
from media_crawler_sim.catalog import FAULT, PICK, MediaCatalog, MediaFile, SourceFiles
from media_crawler_sim.media import Recipe

DEMO, HTML, ERRORS = "demo", "html", "errors"

# name -> (format, width, height, bytes) for the demo feed
DEMO_FILES = (
    ("tiny", "jpeg", 64, 48, 0),
    ("small", "jpeg", 160, 120, 0),
    ("medium", "jpeg", 320, 240, 0),
    ("wide", "jpeg", 640, 360, 0),
    ("large", "jpeg", 800, 600, 0),
    ("portrait", "jpeg", 480, 640, 0),
    ("icon", "png", 96, 96, 0),
    ("diagram", "png", 320, 200, 0),
    ("clip", "mp4", 640, 360, 300_000),
)
# feed -> entries as (name, fault or None)
FAULT_FEEDS = {
    HTML: (("good-1", None), ("login-wall", faults.HTML_PAGE), ("good-2", None)),
    ERRORS: (
        ("missing", faults.NOT_FOUND),
        ("broken", faults.SERVER_ERROR),
        ("throttled", faults.RATE_LIMITED_ONCE),
        ("truncated", faults.CUT_ONCE),
    ),
}
_EXTENSIONS = {"jpeg": "jpg", "png": "png", "mp4": "mp4"}


@dataclass(frozen=True)
class FeedItem:
    file: MediaFile
    fault: str | None = None
    published: datetime | None = None  # listed as `published_at` when set (generated worlds)


@dataclass(frozen=True)
class UrlFeed:
    name: str
    items: tuple[FeedItem, ...]

    @property
    def path(self) -> str:
        return f"/urls/{self.name}.json"


def build(catalog: MediaCatalog) -> dict[str, UrlFeed]:
    feeds = {DEMO: _demo_feed(catalog)}
    for name, entries in FAULT_FEEDS.items():
        files = SourceFiles(catalog, "urls", f"urls: /urls/{name}.json")
        items = []
        for entry, fault in entries:
            recipe = Recipe("jpeg", f"urls/{name}/{entry}", 320, 240)
            path = f"/media/urls/{name}/{entry}.jpg"
            file = files.of_post(entry, None).add(path, recipe, kind="image", item="", variant="file", role=FAULT)
            items.append(FeedItem(file, fault))
        feeds[name] = UrlFeed(name, tuple(items))
    return feeds


def _demo_feed(catalog: MediaCatalog) -> UrlFeed:
    files = SourceFiles(catalog, "urls", "urls: /urls/demo.json")
    items = []
    for name, fmt, width, height, size in DEMO_FILES:
        kind = "video" if fmt == "mp4" else "image"
        path = f"/media/urls/demo/{name}.{_EXTENSIONS[fmt]}"
        recipe = Recipe(fmt, f"urls/demo/{name}", width, height, size)
        file = files.of_post(name, None).add(path, recipe, kind=kind, item="", variant="file", role=PICK)
        items.append(FeedItem(file))
    return UrlFeed(DEMO, tuple(items))

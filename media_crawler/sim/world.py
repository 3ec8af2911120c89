"""The simulated world: every account, post and media file, derived from the seed.

This is the truth table the API answers are built from and a crawl is checked
against (`/_sim/truth`). Building it makes no bytes (media render lazily), so a
Simulator starts in milliseconds.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from media_crawler.sim import faults
from media_crawler.sim.catalog import MediaCatalog
from media_crawler.sim.content import bilibili, facebook, urls, weibo
from media_crawler.sim.seeded import Seeded

DEFAULT_END_DATE = date(2026, 11, 27)
DEFAULT_DAYS = 3


@dataclass(frozen=True)
class SourceSpec:
    """A line of sources.yaml: `platform: spec` plus options. URL-list specs are paths
    on the simulator (`/urls/demo.json`) until an answer prefixes the base URL."""

    platform: str
    spec: str
    options: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        return f"{self.platform}: {self.spec}"

    def as_json(self, base_url: str) -> dict:
        spec = base_url + self.spec if self.spec.startswith("/") else self.spec
        return {"platform": self.platform, "spec": spec, "options": dict(self.options)}


DEMO_SOURCES = (
    SourceSpec("bilibili", f"user {bilibili.DEMO_MID}"),
    SourceSpec("weibo", f"user {weibo.MOBILE_UID}"),
    SourceSpec("weibo", f"user {weibo.AJAX_UID}", (("api", "ajax"),)),
    SourceSpec("facebook", f"page {facebook.CURSOR_PAGE}"),
    SourceSpec("facebook", f"page {facebook.TIME_PAGE}"),
    SourceSpec("urls", "/urls/demo.json"),
)
FAULT_SOURCES = (
    SourceSpec("bilibili", f"user {bilibili.BROKEN_FEED_MID}"),
    SourceSpec("urls", "/urls/html.json"),
    SourceSpec("urls", "/urls/errors.json"),
)


class World:
    is_generated = False  # the generated world of any size is sim/scale/world.py's BigWorld
    page_sizes: dict[str, int] = {}  # API name -> page size overriding the API's own (none here)

    def __init__(self, seed: int = 1, end_date: date = DEFAULT_END_DATE, days: int = DEFAULT_DAYS) -> None:
        self.seeded = Seeded(seed, end_date, days)
        self.catalog = MediaCatalog(seed)
        self.bilibili_users = bilibili.build(self.seeded, self.catalog)
        self.weibo_users, self.weibo_posts = weibo.build(self.seeded, self.catalog)
        self.facebook_pages, self.facebook_videos = facebook.build(self.seeded, self.catalog)
        self.url_feeds = urls.build(self.catalog)
        # Keys are what /x/web-interface/nav hands out (file names of wbi_img urls).
        self.wbi_img_key = self.seeded.hex("wbi/img", 32)
        self.wbi_sub_key = self.seeded.hex("wbi/sub", 32)
        self._bilibili_videos = {}
        for user in self.bilibili_users.values():
            for video in user.videos:
                self._bilibili_videos[video.bvid] = self._bilibili_videos[str(video.aid)] = (user, video)

    @property
    def seed(self) -> int:
        return self.seeded.seed

    @property
    def days(self) -> list[date]:
        return self.seeded.days

    def bilibili_video(self, key: str) -> tuple[bilibili.User, bilibili.Video] | None:
        """The uploader and video of a bvid or aid."""
        return self._bilibili_videos.get(key)

    def facebook_post(self, post_id: str) -> facebook.Post | None:
        for page in self.facebook_pages.values():
            for post in page.posts:
                if post.id == post_id:
                    return post
        return None

    def fault_book(self, fault_rate: float) -> faults.FaultBook:
        """A fresh FaultBook with the URL-list feeds' planned faults."""
        book = faults.FaultBook(self.seed, fault_rate)
        for feed in self.url_feeds.values():
            for item in feed.items:
                if item.fault:
                    book.plan(item.file.path, item.fault)
        return book

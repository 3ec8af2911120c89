"""The simulated world: every account, post and media file, derived from the seed.

This is the truth table the API answers are built from and a crawl is checked
against (`/_sim/truth`). Building it makes no bytes (media render lazily), so a
Simulator starts in milliseconds.
"""
from __future__ import annotations

from datetime import date
from typing import Any

from media_crawler_sim import faults
from media_crawler_sim.catalog import MediaCatalog
from media_crawler_sim.parts import SourceSpec, demo_sources, fault_sources, simulator_parts
from media_crawler_sim.seeded import Seeded

__all__ = ["DEFAULT_DAYS", "DEFAULT_END_DATE", "SourceSpec", "World"]

DEFAULT_END_DATE = date(2026, 11, 27)
DEFAULT_DAYS = 3


def __getattr__(name: str):
    # The demo and fault sources of every registered platform's simulator part (media_crawler_sim/parts.py).
    if name == "DEMO_SOURCES":
        return demo_sources()
    if name == "FAULT_SOURCES":
        return fault_sources()
    raise AttributeError(name)


class World:
    is_generated = False  # the generated world of any size is media_crawler_sim/scale/world.py's BigWorld
    page_sizes: dict[str, int] = {}  # API name -> page size overriding the API's own (none here)

    def __init__(self, seed: int = 1, end_date: date = DEFAULT_END_DATE, days: int = DEFAULT_DAYS) -> None:
        self.seeded = Seeded(seed, end_date, days)
        self.catalog = MediaCatalog(seed)
        self.parts: dict[str, Any] = {}  # platform -> a third-party part's own state
        # Every registered platform's part builds its slice and the lookups its API asks
        # for (builtin.py for the built-in four: bilibili_users and bilibili_video,
        # weibo_users/weibo_posts, facebook_pages/videos and facebook_post, url_feeds).
        self.simulator_parts = simulator_parts()
        for part in self.simulator_parts.values():
            if part.build is not None:
                part.build(self)
        self.demo_sources = tuple(s for part in self.simulator_parts.values() for s in part.demo_sources)
        self.fault_sources = tuple(s for part in self.simulator_parts.values() for s in part.fault_sources)

    @property
    def seed(self) -> int:
        return self.seeded.seed

    @property
    def days(self) -> list[date]:
        return self.seeded.days

    def fault_book(self, fault_rate: float) -> faults.FaultBook:
        """A fresh FaultBook with the faults the platforms' parts plan (the URL-list feeds')."""
        book = faults.FaultBook(self.seed, fault_rate)
        for part in self.simulator_parts.values():
            if part.plan_faults is not None:
                part.plan_faults(self, book)
        return book

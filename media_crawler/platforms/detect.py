"""What `media-crawler normalize` hands a platform's detector (`PlatformSpec.normalize`).

A detector is `fn(body, settings, now, note, context) -> records`: it recognizes the
shape of one saved answer, raises the CrawlError of an error answer, and yields the
records (and per-item errors) a crawl would. `note(dict)` reports shapes and hints
on stderr; `context.known` is what the platform's `normalize_context(bodies)` read
from the answers given together (Bilibili: the video parts by cid, from a view).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

Note = Callable[[dict], None]


@dataclass
class Context:
    """What the files given together tell about each other (the platform decides)."""

    known: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, platform: str, bodies: Iterable[Any]) -> "Context":
        from media_crawler.platforms.registry import specs

        spec = specs().get(platform)
        reader = spec.load("normalize_context") if spec is not None else None
        return cls(dict(reader(list(bodies))) if reader is not None else {})

"""The nouns every stage shares: sources, day windows and normalized media records.

Identity rule (docs/PLATFORMS.md): a record is keyed by (platform, item_id, variant),
the platform's own ids, never by its media_url, which is a signed CDN URL that
expires within hours.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from typing import Any, Mapping, TypeVar

KINDS = ("image", "video", "audio")
_Record = TypeVar("_Record", bound=type)


def item_record(cls: _Record) -> _Record:
    """@dataclass(frozen=True) for a record made at every item, its __init__ storing the
    fields with one `__dict__.update`: dataclass's own calls object.__setattr__ once per
    field, ~1.3K instructions each under CPython 3.11, ~90K a small file over the dozen
    frozen records an item makes (issue 31). The instance is as frozen (assignment and
    deletion still raise FrozenInstanceError), and equality, hash, repr, replace() and
    defaults (default_factory too) are dataclass's. For plain records only: a class with
    __post_init__, slots, keyword-only fields or fields left out of __init__ is refused."""
    cls = dataclass(frozen=True)(cls)
    fields = dataclasses.fields(cls)
    if (hasattr(cls, "__post_init__") or "__slots__" in cls.__dict__
            or any(not f.init or f.kw_only for f in fields)):
        raise TypeError(f"{cls.__qualname__}: item_record takes plain fields only")
    scope: dict[str, Any] = {"_unset": object()}
    params, fills = [], []
    for index, f in enumerate(fields):
        if f.default_factory is not dataclasses.MISSING:
            scope[f"_factory{index}"] = f.default_factory
            params.append(f"{f.name}=_unset")
            fills.append(f"    if {f.name} is _unset:\n        {f.name} = _factory{index}()\n")
        elif f.default is not dataclasses.MISSING:
            scope[f"_default{index}"] = f.default
            params.append(f"{f.name}=_default{index}")
        else:
            params.append(f.name)
    stores = ", ".join(f"{f.name}={f.name}" for f in fields)
    exec(f"def __init__(self, {', '.join(params)}):\n{''.join(fills)}    self.__dict__.update({stores})\n", scope)
    init = scope["__init__"]
    init.__qualname__, init.__module__ = f"{cls.__qualname__}.__init__", cls.__module__
    cls.__init__ = init
    return cls


@dataclass(frozen=True)
class Source:
    """One thing to crawl: `bilibili: user 12345`, `facebook: page 42`, `urls: <feed url>`.

    `options` carries per-source switches (e.g. Weibo's `api: ajax`).
    """

    platform: str
    kind: str  # user | page | feed
    ident: str  # uid / page id / feed URL
    options: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    # Made by its platform's spec (PlatformSpec.parse_source, platforms/registry.parse_source),
    # which decides the key: short, stable, only [a-z0-9-]. A field, so this module asks no registry.
    key: str = field(kw_only=True, compare=False, hash=False)


@dataclass(frozen=True)
class DayWindow:
    """A publication-day partition: [start, end) in UTC."""

    day: date

    @property
    def start(self) -> datetime:
        return datetime.combine(self.day, time.min, tzinfo=timezone.utc)

    @property
    def end(self) -> datetime:
        return self.start + timedelta(days=1)

    def contains(self, moment: datetime | None) -> bool:
        return moment is not None and self.start <= moment < self.end

    @classmethod
    def parse(cls, text: str) -> "DayWindow":
        return cls(date.fromisoformat(text))


@dataclass(frozen=True)
class Lease:
    """A claim on ledger rows: who holds them (`owner`, naming a live process), for how
    many seconds from the claim, and the run they are claimed for (recorded on the rows)."""

    owner: str
    seconds: float
    run_id: str | None = None


@item_record
class MediaRecord:
    """One downloadable media variant, normalized from a platform response.

    - item_id/variant: the platform's identity (e.g. Bilibili `BV1xx:656547014`,
      variant `video-80-7`; Weibo picture `pid`, variant `large`).
    - canonical_url: the stable public page plus the variant; logs and the
      seen-set use it.
    - media_url: what to GET now; signed and short-lived, never a key.
    - group: links records that belong together (a video's video and audio
      tracks, a live photo's image and clip).
    - resolve_ref: what the adapter needs to fetch a fresh media_url later
      (None when the URL does not expire).
    - meta: what a yt-dlp/gallery-dl user expects (title, text, author_id,
      author_name, post_id, post_url, width, height, duration, quality).
    """

    platform: str
    item_id: str
    variant: str
    kind: str
    canonical_url: str
    media_url: str
    published_at: datetime | None = None
    backup_urls: tuple[str, ...] = ()
    group: str | None = None
    resolve_ref: str | None = None
    expected_sha256: str | None = None
    expected_size: int | None = None
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.platform, self.item_id, self.variant)

    def to_json_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["published_at"] = iso_utc(self.published_at)
        data["backup_urls"] = list(self.backup_urls)
        data["meta"] = dict(self.meta)
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_json_dict(), ensure_ascii=False, sort_keys=True)


@dataclass(frozen=True)
class ItemError:
    """A single item of a page that could not be normalized (the rest still can)."""

    platform: str
    error_class: str
    message: str
    item_id: str | None = None
    platform_code: str | None = None


def iso_utc(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")

"""The simulator's media catalog: every file any answer links to, by path under /media.

Every file has a role:
- PICK: what a crawl of a demo source with default settings must end up storing (the
  best video track and audio per part, the largest image size, ...);
- ALTERNATE: also linked from demo answers (a thumbnail, a lower quality, the other
  codec, a video poster): served, but a default crawl need not keep it;
- FAULT: belongs to a fault source (the URL lists that misbehave on purpose).
Only picks make up the truth a complete crawl is checked against.

Bytes are made on first use and kept in memory; a lock makes that safe under the
threading server (making a file twice would be wasted work, not wrong results).
"""
from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from datetime import date

from media_crawler_sim.media import Recipe, render

# What the CDN serving a file demands (enforced in media_crawler_sim/cdn.py).
OPEN = "open"  # nothing: URL-list files, Bilibili covers
BILIBILI_VIDEO = "bilibili-video"  # signed deadline/upsig URL + Referer www.bilibili.com
WEIBO_IMAGE = "weibo-image"  # Referer weibo.com / weibo.cn
WEIBO_VIDEO = "weibo-video"  # signed Expires/ssig/KID URL
FACEBOOK = "facebook"  # signed oh/oe URL

PICK, ALTERNATE, FAULT = "pick", "alternate", "fault"
ROLES = (PICK, ALTERNATE, FAULT)


@dataclass(frozen=True)
class MediaFile:
    """One servable file and what it is in the platform's own terms.

    item/variant follow docs/PLATFORMS.md identities (e.g. `BV1xx:1234`, `video-112-7`;
    a Weibo pid, `large`), so crawler tests can match records to files.
    """

    path: str
    recipe: Recipe
    kind: str  # image | video | audio
    platform: str
    source: str  # "bilibili: user 12345"
    post: str  # id of the post/video the file appears in
    item: str
    variant: str
    day: date | None
    cdn: str = OPEN

    @property
    def mime(self) -> str:
        return self.recipe.mime


class MediaCatalog:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._by_path: dict[str, MediaFile] = {}
        self._by_role: dict[str, list[MediaFile]] = {role: [] for role in ROLES}
        self._content: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def add(self, file: MediaFile, *, role: str, aliases: tuple[str, ...] = ()) -> MediaFile:
        """Register a file; `aliases` are further paths answering the same bytes (Weibo
        size segments larger than the original all serve the original)."""
        for path in (file.path, *aliases):
            if path in self._by_path:
                raise ValueError(f"duplicate simulator media path {path}")
            self._by_path[path] = file
        self._by_role[role].append(file)
        return file

    def lookup(self, path: str) -> MediaFile | None:
        return self._by_path.get(path)

    def files(self, role: str) -> tuple[MediaFile, ...]:
        return tuple(self._by_role[role])

    def content(self, file: MediaFile) -> bytes:
        with self._lock:
            data = self._content.get(file.path)
            if data is None:
                data = self._content[file.path] = render(file.recipe, self.seed)
            return data

    def sha256(self, file: MediaFile) -> str:
        return hashlib.sha256(self.content(file)).hexdigest()


class FileRegistry:
    """Where one source's files are registered: the demo world's catalog (SourceFiles
    below) or the collection of one generated post (media_crawler_sim/scale/content.py)."""

    platform: str
    source: str  # "bilibili: user 12345"

    def register(self, file: MediaFile, *, role: str, aliases: tuple[str, ...]) -> MediaFile:
        raise NotImplementedError

    def of_post(self, post: str, day: date | None) -> PostFiles:
        return PostFiles(self, post, day)


@dataclass(frozen=True)
class SourceFiles(FileRegistry):
    """Registers the files of one source in the catalog."""

    catalog: MediaCatalog
    platform: str
    source: str

    def register(self, file: MediaFile, *, role: str, aliases: tuple[str, ...]) -> MediaFile:
        return self.catalog.add(file, role=role, aliases=aliases)


@dataclass(frozen=True)
class PostFiles:
    """Registers the files of one post: fills in platform, source, post and day for every file.

    post: id of the post/video the files appear in; day: its publication day
    (None for URL-list files, which belong to no day).
    """

    registry: FileRegistry
    post: str
    day: date | None

    def add(
        self, path: str, recipe: Recipe, *, kind: str, item: str, variant: str, cdn: str = OPEN, role: str = PICK,
        aliases: tuple[str, ...] = (),
    ) -> MediaFile:
        """Register a file; `aliases` are further paths answering the same bytes (see MediaCatalog.add)."""
        registry = self.registry
        file = MediaFile(path, recipe, kind, registry.platform, registry.source, self.post, item, variant, self.day, cdn)
        return registry.register(file, role=role, aliases=aliases)

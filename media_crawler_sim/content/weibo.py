"""Weibo demo content: user 678 (read through m.weibo.cn) and user 679 (weibo.com ajax).

Both feeds hold the cases a crawler must get right: 1-4 pictures, a GIF, a live photo
(still + clip), a video in several qualities, a repost whose pictures belong to the
original's mid, a post with more than 9 pictures (the feed lists 9, the detail all),
and for 678 a deleted-repost tombstone; 679 adds a long-text post. One live photo is
posted at 23:xx UTC, which is the next calendar day in the +0800 `created_at`.

Picks: every picture's original (largest) size, every live clip, each video's best
stream. Thumbnails, lower streams and video covers are alternates.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Mapping

from media_crawler_sim.catalog import ALTERNATE, PICK, WEIBO_IMAGE, WEIBO_VIDEO, MediaCatalog, MediaFile, SourceFiles
from media_crawler_sim.media import Recipe
from media_crawler_sim.seeded import BASE36, Seeded

MOBILE_UID, AJAX_UID = "678", "679"
ORIGINAL_AUTHOR = (5001, "sim-original")

# Size segments: thumbnails are real downscales (width), the rest serve the original.
THUMB_SEGMENTS = {"m": {"orj360": 360}, "ajax": {"wap180": 180, "wap360": 360}}
LARGE_SEGMENTS = {"m": ("large",), "ajax": ("large", "orj960", "orj1080", "mw2000")}
PICTURE_SIZES = ((800, 600), (640, 480), (480, 640), (720, 540), (600, 800), (512, 384), (400, 300))
# (label, quality_index, quality label, width, height, bytes); the last is the best.
STREAMS = (
    ("mp4_ld", 0, "360P", 640, 360, 40_000),
    ("mp4_hd", 1, "480P", 852, 480, 80_000),
    ("mp4_720p", 2, "720P", 1280, 720, 150_000),
)

# name -> (slot, UTC hour, pictures, extras); extras: gif, live, video, repost, tombstone, longtext
PLANS = {
    MOBILE_UID: (
        ("single", 0, 3, 1, ()), ("repost", 0, 10, 0, ("repost",)), ("tombstone", 0, 16, 0, ("tombstone",)),
        ("four", 1, 2, 4, ()), ("gif", 1, 12, 0, ("gif",)), ("live", 1, 23, 1, ("live",)),
        ("video", 2, 5, 0, ("video",)), ("many", 2, 11, 12, ()), ("text", 2, 18, 0, ()),
    ),
    AJAX_UID: (
        ("pair", 0, 4, 2, ()), ("longtext", 0, 15, 1, ("longtext",)),
        ("live", 1, 8, 0, ("live",)), ("repost", 1, 19, 0, ("repost",)),
        ("video", 2, 7, 0, ("video",)), ("many", 2, 13, 10, ()),
    ),
}
FEED_PICTURE_LIMIT = 9


@dataclass(frozen=True)
class Picture:
    pid: str
    width: int
    height: int
    original: MediaFile
    thumbnails: Mapping[str, tuple[MediaFile, int, int]]  # segment -> (file, width, height)
    is_gif: bool = False
    live_clip: MediaFile | None = None


@dataclass(frozen=True)
class Stream:
    label: str
    quality_index: int
    quality_label: str
    width: int
    height: int
    file: MediaFile


@dataclass(frozen=True)
class VideoClip:
    object_id: str
    cover: MediaFile
    duration: int
    streams: tuple[Stream, ...]  # worst first, best last


@dataclass(frozen=True)
class Post:
    mid: str
    mblogid: str
    uid: int
    screen_name: str
    created: datetime
    text: str
    long_text: str | None = None
    pictures: tuple[Picture, ...] = ()
    video: VideoClip | None = None
    repost_of: "Post | None" = None
    repost_deleted: bool = False


@dataclass(frozen=True)
class User:
    uid: str
    screen_name: str
    api: str  # "m" | "ajax"
    posts: tuple[Post, ...] = field(default=())  # newest first


def build(seeded: Seeded, catalog: MediaCatalog) -> tuple[dict[str, User], dict[str, dict[str, Post]]]:
    """The users, and per API ("m", "ajax") every post its detail endpoint knows, by
    mid and by mblogid (reposted originals included, deleted ones not)."""
    users, posts_by_api = {}, {}
    for uid, api in ((MOBILE_UID, "m"), (AJAX_UID, "ajax")):
        files = SourceFiles(catalog, "weibo", f"weibo: user {uid}")
        builder = _PostBuilder(seeded, files, uid, api)
        posts = sorted((builder.post(*plan) for plan in PLANS[uid]), key=lambda post: post.created, reverse=True)
        users[uid] = User(uid, f"sim-weibo-{uid}", api, tuple(posts))
        known = posts_by_api.setdefault(api, {})
        for post in posts:
            for detail in (post, None if post.repost_deleted else post.repost_of):
                if detail is not None:
                    known[detail.mid] = known[detail.mblogid] = detail
    return users, posts_by_api


class _PostBuilder:
    def __init__(self, seeded: Seeded, files: SourceFiles, uid: str, api: str) -> None:
        self.seeded, self.files, self.uid, self.api = seeded, files, uid, api

    def post(self, name: str, slot: int, hour: int, picture_count: int, extras: tuple[str, ...]) -> Post:
        key = f"weibo/{self.uid}/{name}"
        created = self.seeded.moment(slot, key, hour)
        mid = self._mid(key, created)
        text = f"sim post {name} by {self.uid}"
        post = Post(mid, self.seeded.text(key + "/bid", 9), int(self.uid), f"sim-weibo-{self.uid}", created, text)
        pictures = [self._picture(key, mid, created, index) for index in range(picture_count)]
        if "gif" in extras:
            pictures.append(self._picture(key, mid, created, len(pictures), gif=True))
        if "live" in extras:
            pictures.insert(0, self._picture(key, mid, created, len(pictures), live=True))
        changes: dict = {"pictures": tuple(pictures)}
        if "video" in extras:
            changes["video"] = self._video(key, mid, created)
        if "longtext" in extras:
            changes["long_text"] = (text + " - the full long text. ") * 12
            changes["text"] = changes["long_text"][:120] + "..."
        if "repost" in extras:
            changes["repost_of"] = self._original(key, created)
            changes["text"] = f"//@{ORIGINAL_AUTHOR[1]}: sim repost"
        if "tombstone" in extras:
            gone = Post(self._mid(key + "/gone", created), self.seeded.text(key + "/gone", 9), 0, "", created, "此微博已被作者删除。")
            changes.update(repost_of=gone, repost_deleted=True)
        return replace(post, **changes)

    def _original(self, key: str, repost_time: datetime) -> Post:
        """The reposted post: another author, two hours earlier, its own pictures."""
        key += "/original"
        created = repost_time.replace(hour=max(0, repost_time.hour - 2))
        mid = self._mid(key, created)
        pictures = tuple(self._picture(key, mid, created, index) for index in range(3 if self.api == "m" else 2))
        uid, screen_name = ORIGINAL_AUTHOR
        return Post(mid, self.seeded.text(key + "/bid", 9), uid, screen_name, created, "sim original post", pictures=pictures)

    def _mid(self, key: str, created: datetime) -> str:
        # Real mids grow with time, which is what since_id paging relies on.
        return str(4_000_000_000_000_000 + int(created.timestamp()) * 100 + self.seeded.rng(key + "/mid").randint(0, 99))

    def _pid(self, key: str, width: int, height: int, gif: bool) -> str:
        """A picture id shaped like sinaimg's: owner, kind, random part, format letter and
        the size in base 36 (`...j20u0140...` is a 1080x1440 JPEG)."""
        return (
            self.seeded.hex(key + "/owner", 8) + ("gy1" if gif else "ly1") + self.seeded.text(key + "/pid", 10, BASE36)
            + ("g" if gif else "j") + "2" + _base36(width) + _base36(height) + self.seeded.text(key + "/tail", 3, BASE36)
        )

    def _picture(self, key: str, mid: str, created: datetime, index: int, *, gif: bool = False, live: bool = False) -> Picture:
        key = f"{key}/pic{index}"
        width, height = (240, 180) if gif else PICTURE_SIZES[self.seeded.rng(key).randrange(len(PICTURE_SIZES))]
        if index >= 4:  # big galleries: smaller pictures keep the demo fast
            width, height = width // 2, height // 2
        ext, fmt = ("gif", "gif") if gif else ("jpg", "jpeg")
        pid = self._pid(key, width, height, gif)
        files = self.files.of_post(mid, created.date())
        common = dict(kind="image", item=pid, cdn=WEIBO_IMAGE)
        aliases = tuple(f"/media/weibo/{segment}/{pid}.{ext}" for segment in LARGE_SEGMENTS[self.api][1:])
        original = files.add(
            f"/media/weibo/large/{pid}.{ext}", Recipe(fmt, key, width, height),
            variant="gif" if gif else "large", aliases=aliases, **common,
        )
        thumbnails = {}
        for segment, thumb_width in THUMB_SEGMENTS[self.api].items():
            if thumb_width >= width:  # the CDN does not upscale: the segment serves the original
                thumbnails[segment] = (original, width, height)
                continue
            thumb_height = round(height * thumb_width / width)
            recipe = Recipe(fmt, key, thumb_width, thumb_height)
            thumb = files.add(f"/media/weibo/{segment}/{pid}.{ext}", recipe, variant=segment, role=ALTERNATE, **common)
            thumbnails[segment] = (thumb, thumb_width, thumb_height)
        clip = None
        if live:
            clip = files.add(
                f"/media/weibo/livephoto/{self.seeded.hex(key + '/live', 24)}.mov",
                Recipe("mov", key + "/live", width, height, 60_000),
                kind="video", item=pid, variant="live", cdn=WEIBO_VIDEO,
            )
        return Picture(pid, width, height, original, thumbnails, gif, clip)

    def _video(self, key: str, mid: str, created: datetime) -> VideoClip:
        object_id = "1034:" + self.seeded.digits(key + "/object", 16)
        files = self.files.of_post(mid, created.date())
        cover = files.add(
            f"/media/weibo/orj480/{self.seeded.hex(key + '/cover', 32)}.jpg", Recipe("jpeg", key + "/cover", 640, 360),
            kind="image", item=object_id, variant="cover", cdn=WEIBO_IMAGE, role=ALTERNATE,
        )
        streams = []
        for label, quality_index, quality_label, width, height, size in STREAMS:
            best = label == STREAMS[-1][0]
            file = files.add(
                f"/media/weibo/o0/{self.seeded.text(f'{key}/{label}', 24)}.mp4",
                Recipe("mp4", f"{key}/{label}", width, height, size),
                kind="video", item=object_id, variant=label, cdn=WEIBO_VIDEO, role=PICK if best else ALTERNATE,
            )
            streams.append(Stream(label, quality_index, quality_label, width, height, file))
        return VideoClip(object_id, cover, 20 + self.seeded.rng(key + "/duration").randint(0, 100), tuple(streams))


def _base36(number: int) -> str:
    digits = ""
    while number:
        number, rest = divmod(number, 36)
        digits = BASE36[rest] + digits
    return digits.rjust(3, "0")


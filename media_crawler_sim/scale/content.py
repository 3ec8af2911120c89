"""One post of a generated account, in the demo content's own dataclasses (so the API
modules answer it unchanged), derived from (seed, platform, account, day, post) alone.

Every media path carries a token for the post it belongs to (see `PostKey` and the
`*_token` scramblers), so the catalog finds a file from its path by rebuilding that
one post. Ids are reversible too: Bilibili aid/cid, Weibo mid, Facebook ids decode
back to the post without any index.
"""
from __future__ import annotations

import random
import string
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import NamedTuple

from media_crawler_sim.catalog import (
    ALTERNATE, BILIBILI_VIDEO, FACEBOOK, PICK, WEIBO_IMAGE, WEIBO_VIDEO, FileRegistry, MediaFile, PostFiles,
)
from media_crawler_sim.content import bilibili as demo_bilibili
from media_crawler_sim.content import facebook as demo_facebook
from media_crawler_sim.content import urls as demo_urls
from media_crawler_sim.content import weibo as demo_weibo
from media_crawler_sim.media import Recipe, dash_segment_base
from media_crawler_sim.parts import SourceSpec, simulator_parts
from media_crawler_sim.scale.codec import BASE36, Scrambler, from_base, to_base
from media_crawler_sim.scale.options import MAX_MEDIA_PER_POST, MEDIA_SIZES, WorldSize
from media_crawler_sim.seeded import BASE62, BV_ALPHABET

HEX = "0123456789abcdef"

BILIBILI_MID_BASE = 100_000_000  # mid = base + account
BILIBILI_AID_BASE = 10**11  # aid = base + post ordinal
BILIBILI_CID_BASE = 10**13  # cid = base + post ordinal * MAX_MEDIA_PER_POST + part
WEIBO_UID_BASE = 7_000_000_000
WEIBO_MID_BASE = 4_000_000_000_000_000
WEIBO_ACCOUNT_SPACE = 10**6  # mid = base + (day * posts_per_day + post) * space + account: grows with time
FACEBOOK_PAGE_BASE = 100_090_000_000_000
VIDEO_ONE_IN = 8  # about one Weibo/Facebook post in 8 is a video post


class PostKey(NamedTuple):
    platform: str
    account: int
    day: int  # 0 = the oldest day of the world
    post: int  # 0 = the day's first post


def generated_platforms() -> tuple[str, ...]:
    """The platforms a generated world serves, in registry order: those whose simulator part
    (the media_crawler_sim.platforms entry-point group) says `generated` and that this
    generator can make posts for (a `_<platform>` method below). A registered platform with
    no generated content is simply absent from generated worlds."""
    return tuple(name for name, part in simulator_parts().items()
                 if part.generated and callable(getattr(Generator, "_" + name, None)))


@dataclass(frozen=True)
class Generated:
    """A post as the APIs see it (`post`), every path it serves (`files`, aliases
    included) and its picks in order (what a complete crawl stores)."""

    key: PostKey
    post: object
    files: dict[str, MediaFile]
    picks: tuple[MediaFile, ...]


class Collector(FileRegistry):
    """Collects a post's files (registered as in the demo world: `of_post(...).add(...)`)."""

    def __init__(self, platform: str, source: str) -> None:
        self.platform, self.source = platform, source
        self.files: dict[str, MediaFile] = {}
        self.picks: list[MediaFile] = []

    def register(self, file: MediaFile, *, role: str, aliases: tuple[str, ...]) -> MediaFile:
        for alias in (file.path, *aliases):
            self.files[alias] = file
        if role == PICK:
            self.picks.append(file)
        return file


class Generator:
    """Builds posts for one world; stateless apart from the scramblers."""

    def __init__(self, seed: int, days: list[date], size: WorldSize) -> None:
        self.seed, self.days, self.size = seed, days, size
        self.images, self.pngs, self.mp4_bytes, self.dash_video_bytes, self.dash_audio_bytes = MEDIA_SIZES[size.media_size]
        self.bvid = Scrambler(seed, "bilibili/bvid", len(BV_ALPHABET) ** 9)
        self.cover_token = Scrambler(seed, "bilibili/cover", 16**12)
        self.mblogid = Scrambler(seed, "weibo/mblogid", 62**9)
        self.pid_token = Scrambler(seed, "weibo/pid", 36**10)
        self.weibo_video_token = Scrambler(seed, "weibo/video", 36**10)
        self.object_id = Scrambler(seed, "weibo/object", 10**16)
        self.fb_post = Scrambler(seed, "facebook/post", 10**16)
        self.fb_photo = Scrambler(seed, "facebook/photo", 10**16)
        self.fb_video = Scrambler(seed, "facebook/video", 10**16)
        self.fb_album = Scrambler(seed, "facebook/album", 10**16)
        self.fb_token = Scrambler(seed, "facebook/path", 10**12)

    # --- coordinates -----------------------------------------------------------------

    def ordinal(self, key: PostKey) -> int:
        return (key.account * len(self.days) + key.day) * self.size.posts_per_day + key.post

    def key_of(self, platform: str, ordinal: int) -> PostKey | None:
        per_account = len(self.days) * self.size.posts_per_day
        account, rest = divmod(ordinal, per_account)
        if not 0 <= account < self.size.accounts(platform):
            return None
        day, post = divmod(rest, self.size.posts_per_day)
        return PostKey(platform, account, day, post)

    def newest_first(self, platform: str, account: int, index: int) -> PostKey:
        """The index-th post of an account's feed, newest first."""
        back_days, back_posts = divmod(index, self.size.posts_per_day)
        return PostKey(platform, account, len(self.days) - 1 - back_days, self.size.posts_per_day - 1 - back_posts)

    def rng(self, key: str) -> random.Random:
        return random.Random(f"scale/{key}")

    def created(self, key: PostKey) -> datetime:
        """Posts spread evenly over their day with a seeded jitter of a quarter slot:
        strictly increasing within an account, never on a day boundary."""
        slot = 86_400 / self.size.posts_per_day
        jitter = self.rng(f"{key}/time").uniform(-0.25, 0.25) * slot
        start = datetime.combine(self.days[key.day], time(0), tzinfo=timezone.utc)
        return start + timedelta(seconds=int((key.post + 0.5) * slot + jitter))

    def _image(self, name: str, index: int) -> tuple[int, int]:
        return self.images[self.rng(name).randrange(len(self.images)) if index < 0 else index % len(self.images)]

    def _hex(self, name: str, count: int) -> str:
        return "".join(self.rng(name).choices(HEX, k=count))

    def _digits(self, name: str, count: int) -> str:
        return "".join(self.rng(name).choices(string.digits, k=count))

    def is_video_post(self, key: PostKey) -> bool:
        return self.rng(f"{key}/kind").randrange(VIDEO_ONE_IN) == 0

    # --- sources -----------------------------------------------------------------------

    @staticmethod
    def bilibili_mid(account: int) -> int:
        return BILIBILI_MID_BASE + account

    @staticmethod
    def weibo_uid(account: int) -> str:
        return str(WEIBO_UID_BASE + account)

    @staticmethod
    def weibo_api(account: int) -> str:
        return "m" if account % 2 == 0 else "ajax"

    @staticmethod
    def facebook_page_id(account: int) -> str:
        return str(FACEBOOK_PAGE_BASE + account)

    @staticmethod
    def facebook_paging(account: int) -> str:
        return "cursor" if account % 2 == 0 else "time"

    @staticmethod
    def url_list(account: int) -> str:
        return f"list-{account}"

    def source_spec(self, platform: str, account: int) -> SourceSpec:
        """The sources.yaml line of one generated account."""
        if platform == "bilibili":
            return SourceSpec("bilibili", f"user {self.bilibili_mid(account)}")
        if platform == "weibo":
            options = (("api", "ajax"),) if self.weibo_api(account) == "ajax" else ()
            return SourceSpec("weibo", f"user {self.weibo_uid(account)}", options)
        if platform == "facebook":
            return SourceSpec("facebook", f"page {self.facebook_page_id(account)}")
        return SourceSpec("urls", f"/urls/{self.url_list(account)}.json")

    # --- posts -------------------------------------------------------------------------

    def generate(self, key: PostKey) -> Generated:
        files = Collector(key.platform, self.source_spec(key.platform, key.account).label)
        post = getattr(self, "_" + key.platform)(key, files)
        return Generated(key, post, files.files, tuple(files.picks))

    def _bilibili(self, key: PostKey, files: Collector) -> demo_bilibili.Video:
        n = self.ordinal(key)
        bvid = "BV1" + to_base(self.bvid.encode(n), BV_ALPHABET, 9)
        published = self.created(key)
        video_files = files.of_post(bvid, published.date())
        name = f"bilibili/{n}"
        width, height = self._image(name + "/cover", -1)
        cover = video_files.add(
            f"/media/bilibili/bfs/archive/{to_base(self.cover_token.encode(n), HEX, 12)}{self._hex(name + '/cover', 28)}.jpg",
            Recipe("jpeg", name + "/cover", width, height), kind="image", item=bvid, variant="cover",
        )
        parts = tuple(self._bilibili_part(video_files, n, bvid, page) for page in range(1, self.size.media_per_post + 1))
        title = f"sim video {key.day + 1}-{key.post + 1}"
        return demo_bilibili.Video(bvid, BILIBILI_AID_BASE + n, title, f"generated upload {n}", published, cover, parts)

    def _bilibili_part(self, files: PostFiles, n: int, bvid: str, page: int) -> demo_bilibili.Part:
        cid = BILIBILI_CID_BASE + n * MAX_MEDIA_PER_POST + page - 1
        item = f"{bvid}:{cid}"
        directory = f"/media/bilibili/upgcxcode/{cid % 100:02d}/{cid // 100 % 100:02d}/{cid}"
        duration = 30 + self.rng(f"{item}/duration").randint(0, 300)
        largest = max(size for *_, size in demo_bilibili.QUALITIES.values())
        video = []
        for codecid in (demo_bilibili.AVC, demo_bilibili.HEVC):
            for qn, (width, height, avc_codecs, size) in demo_bilibili.QUALITIES.items():
                file_id = (30000 if codecid == demo_bilibili.AVC else 100000) + qn
                track_bytes = self.dash_video_bytes * size // largest
                if codecid == demo_bilibili.HEVC:
                    track_bytes = track_bytes * 3 // 4
                recipe = Recipe("m4s-video", f"{item}/{qn}/{codecid}", width, height, track_bytes)
                file = files.add(
                    f"{directory}/{cid}_nb3-1-{file_id}.m4s", recipe,
                    kind="video", item=item, variant=f"video-{qn}-{codecid}", cdn=BILIBILI_VIDEO,
                    role=PICK if (qn, codecid) == demo_bilibili.PICK_VIDEO else ALTERNATE,
                )
                codecs = avc_codecs if codecid == demo_bilibili.AVC else demo_bilibili.HEVC_CODECS
                video.append(demo_bilibili.DashTrack(
                    file, qn, codecid, width, height, max(1, recipe.size) * 8 * 100, codecs, dash_segment_base(recipe)
                ))
        audio = []
        largest_audio = max(size for _, size in demo_bilibili.AUDIO.values())
        for audio_id, (bandwidth, size) in demo_bilibili.AUDIO.items():
            recipe = Recipe("m4s-audio", f"{item}/{audio_id}", size=self.dash_audio_bytes * size // largest_audio)
            file = files.add(
                f"{directory}/{cid}_nb3-1-{audio_id}.m4s", recipe,
                kind="audio", item=item, variant=f"audio-{audio_id}", cdn=BILIBILI_VIDEO,
                role=PICK if audio_id == demo_bilibili.PICK_AUDIO else ALTERNATE,
            )
            audio.append(demo_bilibili.DashTrack(file, audio_id, 0, 0, 0, bandwidth, "mp4a.40.2", dash_segment_base(recipe)))
        video.sort(key=lambda track: (-track.track_id, track.codecid))
        audio.sort(key=lambda track: -track.bandwidth)
        return demo_bilibili.Part(cid, page, f"part {page}", duration, tuple(video), tuple(audio), None)

    def weibo_mid(self, key: PostKey) -> str:
        moment = key.day * self.size.posts_per_day + key.post
        return str(WEIBO_MID_BASE + moment * WEIBO_ACCOUNT_SPACE + key.account)

    def weibo_key_of_mid(self, mid: int) -> PostKey | None:
        moment, account = divmod(mid - WEIBO_MID_BASE, WEIBO_ACCOUNT_SPACE)
        day, post = divmod(moment, self.size.posts_per_day)
        if mid < WEIBO_MID_BASE or not 0 <= day < len(self.days) or account >= self.size.weibo_users:
            return None
        return PostKey("weibo", account, day, post)

    def _weibo(self, key: PostKey, files: Collector) -> demo_weibo.Post:
        n = self.ordinal(key)
        uid, api = self.weibo_uid(key.account), self.weibo_api(key.account)
        created = self.created(key)
        mid = self.weibo_mid(key)
        name = f"weibo/{n}"
        post = demo_weibo.Post(
            mid, to_base(self.mblogid.encode(n), BASE62, 9), int(uid), f"sim-weibo-{uid}", created,
            f"sim post {key.day + 1}-{key.post + 1} by {uid}",
        )
        post_files = files.of_post(mid, created.date())
        if self.is_video_post(key):
            return _replace(post, video=self._weibo_video(post_files, name, n))
        owner = self._hex(f"weibo/{uid}/owner", 8)
        token = to_base(self.pid_token.encode(n), BASE36, 10)
        pictures = tuple(
            self._weibo_picture(post_files, api, name, owner, token, index) for index in range(self.size.media_per_post)
        )
        return _replace(post, pictures=pictures)

    def _weibo_picture(
        self, files: PostFiles, api: str, name: str, owner: str, token: str, index: int
    ) -> demo_weibo.Picture:
        width, height = self._image(f"{name}/pic{index}", -1)
        pid = owner + "ly1" + token + "j2" + to_base(width, BASE36, 3) + to_base(height, BASE36, 3) + to_base(index, BASE36, 3)
        common = dict(kind="image", item=pid, cdn=WEIBO_IMAGE)
        recipe_key = f"{name}/pic{index}"
        aliases = tuple(f"/media/weibo/{segment}/{pid}.jpg" for segment in demo_weibo.LARGE_SEGMENTS[api][1:])
        original = files.add(f"/media/weibo/large/{pid}.jpg", Recipe("jpeg", recipe_key, width, height),
                             variant="large", aliases=aliases, **common)
        thumbnails = {}
        for segment, thumb_width in demo_weibo.THUMB_SEGMENTS[api].items():
            if thumb_width >= width:
                thumbnails[segment] = (original, width, height)
                continue
            thumb_height = round(height * thumb_width / width)
            thumb = files.add(f"/media/weibo/{segment}/{pid}.jpg", Recipe("jpeg", recipe_key, thumb_width, thumb_height),
                              variant=segment, role=ALTERNATE, **common)
            thumbnails[segment] = (thumb, thumb_width, thumb_height)
        return demo_weibo.Picture(pid, width, height, original, thumbnails)

    def _weibo_video(self, files: PostFiles, name: str, n: int) -> demo_weibo.VideoClip:
        object_id = "1034:" + to_base(self.object_id.encode(n), string.digits, 16)
        token = to_base(self.weibo_video_token.encode(n), BASE36, 10)
        width, height = self._image(name + "/cover", -1)
        cover = files.add(
            f"/media/weibo/orj480/{token}{self._hex(name + '/cover', 22)}.jpg",
            Recipe("jpeg", f"{name}/cover", width, height),
            kind="image", item=object_id, variant="cover", cdn=WEIBO_IMAGE, role=ALTERNATE,
        )
        streams = []
        for rank, (label, quality_index, quality_label, width, height, _) in enumerate(demo_weibo.STREAMS, start=1):
            best = label == demo_weibo.STREAMS[-1][0]
            file = files.add(
                f"/media/weibo/o0/{token}{label[4:]:<4}{self._hex(f'{name}/{label}', 10)}.mp4".replace(" ", "x"),
                Recipe("mp4", f"{name}/{label}", width, height, self.mp4_bytes * rank // 3),
                kind="video", item=object_id, variant=label, cdn=WEIBO_VIDEO, role=PICK if best else ALTERNATE,
            )
            streams.append(demo_weibo.Stream(label, quality_index, quality_label, width, height, file))
        duration = 20 + self.rng(name + "/duration").randint(0, 100)
        return demo_weibo.VideoClip(object_id, cover, duration, tuple(streams))

    def facebook_post_id(self, key: PostKey) -> str:
        return f"{self.facebook_page_id(key.account)}_{to_base(self.fb_post.encode(self.ordinal(key)), string.digits, 16)}"

    def _facebook(self, key: PostKey, files: Collector) -> demo_facebook.Post:
        n = self.ordinal(key)
        page_id = self.facebook_page_id(key.account)
        post_id = self.facebook_post_id(key)
        created = self.created(key)
        token = to_base(self.fb_token.encode(n), string.digits, 12)
        name = f"facebook/{n}"
        post_files = files.of_post(post_id, created.date())
        if self.is_video_post(key):
            message = f"sim video post {key.day + 1}-{key.post + 1} on page {page_id}"
            video = self._facebook_video(post_files, name, token, n, created)
            return demo_facebook.Post(post_id, page_id, created, message, (video,))
        count = self.size.media_per_post
        photos = tuple(self._facebook_photo(post_files, name, token, n, index) for index in range(count))
        if count == 1:
            attachment = demo_facebook.Attachment("photo", photos[0].target_id, photos)
        else:
            attachment = demo_facebook.Attachment("album", to_base(self.fb_album.encode(n), string.digits, 16), photos)
        message = f"sim {attachment.media_type} post {key.day + 1}-{key.post + 1} on page {page_id}"
        return demo_facebook.Post(post_id, page_id, created, message, (attachment,))

    def _facebook_photo(
        self, files: PostFiles, name: str, token: str, n: int, index: int,
        *, role: str = PICK, variant: str = "image", item: str | None = None,
    ) -> demo_facebook.Photo:
        png = variant == "image" and self.rng(f"{name}/{index}/format").randrange(4) == 0
        width, height = self.pngs[index % len(self.pngs)] if png else self._image(f"{name}/{index}/size", -1)
        target_id = to_base(self.fb_photo.encode(n * (MAX_MEDIA_PER_POST + 1) + index), string.digits, 16)
        folder = "t15.5256-10" if variant == "poster" else "t39.30808-6"
        path = f"/media/facebook/v/{folder}/{token}_{index:02d}{self._digits(f'{name}/{index}/name', 7)}_n.{'png' if png else 'jpg'}"
        file = files.add(
            path, Recipe("png" if png else "jpeg", f"{name}/{index}", width, height),
            kind="image", item=item or target_id, variant=variant, cdn=FACEBOOK, role=role,
        )
        return demo_facebook.Photo(target_id, file, width, height)

    def _facebook_video(self, files: PostFiles, name: str, token: str, n: int, created: datetime) -> demo_facebook.Attachment:
        target_id = to_base(self.fb_video.encode(n), string.digits, 16)
        file = files.add(
            f"/media/facebook/v/t42.1790-2/{token}_{self._digits(name + '/video', 9)}_n.mp4",
            Recipe("mp4", f"{name}/video", 720, 1280, self.mp4_bytes),
            kind="video", item=target_id, variant="source", cdn=FACEBOOK,
        )
        poster = self._facebook_photo(files, name, token, n, MAX_MEDIA_PER_POST, role=ALTERNATE, variant="poster",
                                      item=target_id)
        length = round(5 + self.rng(name + "/length").random() * 60, 3)
        return demo_facebook.Attachment("video", target_id, video=demo_facebook.Video(target_id, file, poster, length, created))

    def _urls(self, key: PostKey, files: Collector) -> tuple[demo_urls.FeedItem, ...]:
        created = self.created(key)
        folder = f"/media/urls/{self.url_list(key.account)}/{key.day}/{key.post}"
        name = f"urls/{self.ordinal(key)}"
        items = []
        for index in range(self.size.media_per_post):
            kind = self.rng(f"{name}/{index}/kind").randrange(8)
            if kind == 0:
                fmt, (width, height), size = "mp4", (640, 360), self.mp4_bytes
            elif kind == 1:
                fmt, (width, height), size = "png", self.pngs[index % len(self.pngs)], 0
            else:
                fmt, (width, height), size = "jpeg", self._image(f"{name}/{index}", -1), 0
            file = files.of_post(f"{key.day}-{key.post}-{index}", created.date()).add(
                f"{folder}-{index}.{demo_urls._EXTENSIONS[fmt]}", Recipe(fmt, f"{name}/{index}", width, height, size),
                kind="video" if fmt == "mp4" else "image", item="", variant="file",
            )
            items.append(demo_urls.FeedItem(file, None, created))
        return tuple(items)

    # --- paths back to posts -----------------------------------------------------------

    def key_of_path(self, path: str) -> PostKey | None:
        """The post whose files include `path` (if the path is one of this world's)."""
        parts = path.split("/")  # "", "media", platform, ...
        if len(parts) < 5 or parts[1] != "media":
            return None
        name = parts[-1]
        platform = parts[2]
        if platform == "bilibili" and parts[3] == "bfs":
            return self._decoded("bilibili", self.cover_token, from_base(name[:12], HEX))
        if platform == "bilibili" and parts[3] == "upgcxcode" and len(parts) == 8 and parts[6].isdigit():
            return self.key_of("bilibili", (int(parts[6]) - BILIBILI_CID_BASE) // MAX_MEDIA_PER_POST)
        if platform == "weibo" and len(parts) == 5:
            if parts[3] in ("o0", "orj480"):
                return self._decoded("weibo", self.weibo_video_token, from_base(name[:10], BASE36))
            return self._decoded("weibo", self.pid_token, from_base(name[11:21], BASE36))
        if platform == "facebook" and len(parts) == 6:
            return self._decoded("facebook", self.fb_token, from_base(name.split("_")[0], string.digits))
        if platform == "urls" and len(parts) == 6 and parts[3].startswith("list-") and parts[4].isdigit():
            account, post = parts[3].removeprefix("list-"), name.split("-")[0]
            if account.isdigit() and post.isdigit():
                day = int(parts[4])
                if day < len(self.days) and int(post) < self.size.posts_per_day and int(account) < self.size.url_lists:
                    return PostKey("urls", int(account), day, int(post))
        return None

    def _decoded(self, platform: str, scrambler: Scrambler, code: int | None) -> PostKey | None:
        if code is None or code >= scrambler.modulus:
            return None
        return self.key_of(platform, scrambler.decode(code))


def _replace(post, **changes):
    from dataclasses import replace

    return replace(post, **changes)

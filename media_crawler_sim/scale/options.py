"""The scale options: how many accounts per platform, posts per day, media per post,
and how big the media are."""
from __future__ import annotations

from dataclasses import asdict, dataclass

MAX_ACCOUNTS = 1_000_000  # per platform (Weibo mids reserve 6 digits for the account)
MAX_POSTS_PER_DAY = 1_000
MAX_MEDIA_PER_POST = 20
MAX_POSTS = 10**11  # accounts x days x posts per day, per platform (ids stay their usual width)

# name -> (image sizes as (width, height), PNG sizes, MP4 bytes, DASH video bytes, DASH audio bytes)
MEDIA_SIZES = {
    # A few hundred bytes to a few KB: scale runs measure the crawler, not the disk.
    "small": (((48, 32), (40, 30), (32, 48), (36, 36)), ((24, 16), (20, 20)), 2_000, 1_500, 1_000),
    # What the demo world serves: tens of KB images, 100+ KB videos.
    "demo": (((720, 540), (640, 480), (480, 640), (600, 800)), ((320, 200), (96, 96)), 150_000, 30_000, 9_000),
}


@dataclass(frozen=True)
class WorldSize:
    """A generated world: `bilibili_users` Bilibili uploaders, `weibo_users` Weibo users
    (even ones read through m.weibo.cn, odd ones through the weibo.com ajax API),
    `facebook_pages` pages (even: cursor paging, odd: time paging), `url_lists` URL-list
    feeds; every account posts `posts_per_day` times a day, each post carrying
    `media_per_post` media (a Bilibili video's parts, a Weibo post's pictures, a
    Facebook post's photos, a URL list's files per post; some Weibo and Facebook posts
    are a single video instead)."""

    bilibili_users: int = 1
    weibo_users: int = 1
    facebook_pages: int = 1
    url_lists: int = 1
    posts_per_day: int = 2
    media_per_post: int = 2
    media_size: str = "small"

    def __post_init__(self) -> None:
        for name in ("bilibili_users", "weibo_users", "facebook_pages", "url_lists"):
            if not 0 <= getattr(self, name) <= MAX_ACCOUNTS:
                raise ValueError(f"{name} must be within 0..{MAX_ACCOUNTS}")
        if not 1 <= self.posts_per_day <= MAX_POSTS_PER_DAY:
            raise ValueError(f"posts per day must be within 1..{MAX_POSTS_PER_DAY}")
        if not 1 <= self.media_per_post <= MAX_MEDIA_PER_POST:
            raise ValueError(f"media per post must be within 1..{MAX_MEDIA_PER_POST}")
        if self.media_size not in MEDIA_SIZES:
            raise ValueError(f"media size must be one of {', '.join(MEDIA_SIZES)}")

    @classmethod
    def of(cls, accounts: int | None = None, **given) -> "WorldSize | None":
        """The size the options ask for, or None when none is given (the demo world).
        `accounts` sets every platform's count at once; a platform's own count wins."""
        chosen = {name: value for name, value in given.items() if value is not None}
        if accounts is None and not chosen:
            return None
        counts = ("bilibili_users", "weibo_users", "facebook_pages", "url_lists")
        if accounts is not None:
            chosen = {**{name: accounts for name in counts}, **chosen}
        return cls(**chosen)

    def accounts(self, platform: str) -> int:
        return {
            "bilibili": self.bilibili_users, "weibo": self.weibo_users,
            "facebook": self.facebook_pages, "urls": self.url_lists,
        }[platform]

    def as_json(self) -> dict:
        return asdict(self)

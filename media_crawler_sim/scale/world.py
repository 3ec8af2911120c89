"""BigWorld: a generated world with the same interface as media_crawler_sim/world.py's World (the
API modules serve either), over lazy sequences and maps. Building one allocates
nothing per account; posts are made when asked for and kept in a bounded LRU."""
from __future__ import annotations

import hashlib
from datetime import date
from functools import lru_cache
from typing import Iterator

from media_crawler_sim import faults
from media_crawler_sim.catalog import MediaFile
from media_crawler_sim.content import bilibili as demo_bilibili
from media_crawler_sim.content import facebook as demo_facebook
from media_crawler_sim.content import urls as demo_urls
from media_crawler_sim.content import weibo as demo_weibo
from media_crawler_sim.media import render
from media_crawler_sim.scale.codec import from_base
from media_crawler_sim.scale.content import (
    BILIBILI_AID_BASE, BILIBILI_MID_BASE, FACEBOOK_PAGE_BASE, WEIBO_UID_BASE, Generated, Generator, PostKey,
    generated_platforms,
)
from media_crawler_sim.scale.lazy import BytesLru, LazyMap, LazySeq
from media_crawler_sim.scale.options import WorldSize
from media_crawler_sim.seeded import BASE62, BV_ALPHABET, Seeded
from media_crawler_sim.world import SourceSpec

POST_CACHE = 2048  # posts kept (each a few dozen small objects)
# A crawl asks for each file's sha256 and size with every feed page holding it (a feed
# is walked once per day partition) and for its bytes later, after thousands of other
# files: caches smaller than a world's files made the simulator render each one up to
# five times at 100k items (8 ms of its CPU per item, against 2-4 at 10k), so it, not
# the crawler, set the pace. Both stay bounded whatever the world's size: ~250 MB and
# ~40 MB at most, ~150k small files.
CONTENT_CACHE_BYTES = 256 * 2**20
SHA_CACHE = 262_144
# Real-sized pages where the client cannot choose (the demo's are tiny so it pages).
PAGE_SIZES = {"weibo-m": 10, "weibo": 20, "urls": 100}


class LazyCatalog:
    """The MediaCatalog interface over generated posts: a path finds its post, bytes
    render on demand and are kept in a byte-bounded LRU."""

    def __init__(self, world: "BigWorld") -> None:
        self.world = world
        self.seed = world.seed
        self._bytes = BytesLru(CONTENT_CACHE_BYTES)
        self._sha = lru_cache(maxsize=SHA_CACHE)(self._sha256)

    def lookup(self, path: str) -> MediaFile | None:
        key = self.world.generator.key_of_path(path)
        return None if key is None else self.world.generated(key).files.get(path)

    def content(self, file: MediaFile) -> bytes:
        return self._bytes.get(file.path, lambda: render(file.recipe, self.seed))

    def sha256(self, file: MediaFile) -> str:
        return self._sha(file.path, file.recipe)

    def _sha256(self, path: str, recipe) -> str:
        data = self._bytes.get(path, lambda: render(recipe, self.seed))
        return hashlib.sha256(data).hexdigest()

    def files(self, role: str) -> tuple[MediaFile, ...]:
        raise TypeError("a generated world has no file list: read its truth in pages (scale/truth.py)")


class BigWorld:
    is_generated = True

    def __init__(self, size: WorldSize, seed: int = 1, end_date: date | None = None, days: int = 3) -> None:
        from media_crawler_sim.world import DEFAULT_END_DATE

        self.size = size
        self.platforms = generated_platforms()
        self.seeded = Seeded(seed, end_date or DEFAULT_END_DATE, days)
        total = max(size.accounts(platform) for platform in self.platforms) * days * size.posts_per_day
        if total > 10**11:
            raise ValueError("world too large: accounts x days x posts per day must stay under 10^11 per platform")
        self.generator = Generator(seed, self.seeded.days, size)
        self.generated = lru_cache(maxsize=POST_CACHE)(self.generator.generate)
        self.catalog = LazyCatalog(self)
        self.wbi_img_key = self.seeded.hex("wbi/img", 32)
        self.wbi_sub_key = self.seeded.hex("wbi/sub", 32)
        self.page_sizes = dict(PAGE_SIZES)
        self.posts_per_account = days * size.posts_per_day
        g = self.generator
        self.bilibili_users = LazyMap(
            self._bilibili_user, lambda: (g.bilibili_mid(a) for a in range(size.bilibili_users)), size.bilibili_users
        )
        self.weibo_users = LazyMap(self._weibo_user, lambda: (g.weibo_uid(a) for a in range(size.weibo_users)), size.weibo_users)
        self.weibo_posts = {api: LazyMap(lambda key, api=api: self._weibo_post(key, api), lambda: iter(()), 0)
                            for api in ("m", "ajax")}
        self.facebook_pages = LazyMap(
            self._facebook_page, lambda: (g.facebook_page_id(a) for a in range(size.facebook_pages)), size.facebook_pages
        )
        self.facebook_videos = LazyMap(self._facebook_video, lambda: iter(()), 0)
        self.url_feeds = LazyMap(self._url_feed, lambda: (g.url_list(a) for a in range(size.url_lists)), size.url_lists)

    @property
    def seed(self) -> int:
        return self.seeded.seed

    @property
    def days(self) -> list[date]:
        return self.seeded.days

    def fault_book(self, fault_rate: float) -> faults.FaultBook:
        return faults.FaultBook(self.seed, fault_rate)  # no planned faults: only --fault-rate's random 503s

    # --- accounts and their feeds (newest first) -------------------------------------

    def _feed(self, platform: str, account: int) -> LazySeq:
        return LazySeq(
            self.posts_per_account,
            lambda index: self.generated(self.generator.newest_first(platform, account, index)).post,
        )

    @staticmethod
    def _account(key, base: int, count: int) -> int | None:
        text = str(key)
        if not text.isdigit():
            return None
        account = int(text) - base
        return account if 0 <= account < count else None

    def _bilibili_user(self, mid) -> demo_bilibili.User | None:
        account = self._account(mid, BILIBILI_MID_BASE, self.size.bilibili_users)
        if account is None:
            return None
        return demo_bilibili.User(BILIBILI_MID_BASE + account, f"sim-uploader-{account}", self._feed("bilibili", account))

    def _weibo_user(self, uid) -> demo_weibo.User | None:
        account = self._account(uid, WEIBO_UID_BASE, self.size.weibo_users)
        if account is None:
            return None
        api = self.generator.weibo_api(account)
        return demo_weibo.User(str(uid), f"sim-weibo-{uid}", api, self._feed("weibo", account))

    def _facebook_page(self, page_id) -> demo_facebook.Page | None:
        account = self._account(page_id, FACEBOOK_PAGE_BASE, self.size.facebook_pages)
        if account is None:
            return None
        paging = self.generator.facebook_paging(account)
        return demo_facebook.Page(str(page_id), f"Sim Page {page_id}", paging, self._feed("facebook", account))

    def _url_feed(self, name) -> demo_urls.UrlFeed | None:
        account = self._account(str(name).removeprefix("list-"), 0, self.size.url_lists)
        if account is None or not str(name).startswith("list-"):
            return None
        per_post = self.size.media_per_post

        def item(index: int) -> demo_urls.FeedItem:
            post, rest = divmod(index, per_post)
            return self.generated(self.generator.newest_first("urls", account, post)).post[rest]

        return demo_urls.UrlFeed(str(name), LazySeq(self.posts_per_account * per_post, item))

    # --- lookups by id -----------------------------------------------------------------

    def bilibili_video(self, key: str) -> tuple[demo_bilibili.User, demo_bilibili.Video] | None:
        g = self.generator
        post_key = None
        if key.startswith("BV1") and len(key) == 12:
            code = from_base(key[3:], BV_ALPHABET)
            if code is not None:
                post_key = g.key_of("bilibili", g.bvid.decode(code))
        elif key.isdigit() and int(key) >= BILIBILI_AID_BASE:
            post_key = g.key_of("bilibili", int(key) - BILIBILI_AID_BASE)
        if post_key is None:
            return None
        video = self.generated(post_key).post
        if video.bvid != key and str(video.aid) != key:
            return None
        return self._bilibili_user(g.bilibili_mid(post_key.account)), video

    def _weibo_post(self, key: str, api: str) -> demo_weibo.Post | None:
        g = self.generator
        post_key = None
        if key.isdigit():
            post_key = g.weibo_key_of_mid(int(key))
        elif len(key) == 9:
            code = from_base(key, BASE62)
            if code is not None:
                post_key = g.key_of("weibo", g.mblogid.decode(code))
        if post_key is None or g.weibo_api(post_key.account) != api:
            return None
        post = self.generated(post_key).post
        return post if key in (post.mid, post.mblogid) else None

    def facebook_post(self, post_id: str) -> demo_facebook.Post | None:
        page_id, _, number = post_id.partition("_")
        account = self._account(page_id, FACEBOOK_PAGE_BASE, self.size.facebook_pages)
        if account is None or not number.isdigit() or len(number) != 16:
            return None
        post_key = self.generator.key_of("facebook", self.generator.fb_post.decode(int(number)))
        if post_key is None or post_key.account != account:
            return None
        post = self.generated(post_key).post
        return post if post.id == post_id else None

    def _facebook_video(self, target_id) -> demo_facebook.Video | None:
        text = str(target_id)
        if not text.isdigit() or len(text) != 16:
            return None
        post_key = self.generator.key_of("facebook", self.generator.fb_video.decode(int(text)))
        if post_key is None:
            return None
        for attachment in self.generated(post_key).post.attachments:
            if attachment.video is not None and attachment.video.target_id == text:
                return attachment.video
        return None

    # --- sources and truth -------------------------------------------------------------

    def source_specs(self, start: tuple[int, int] = (0, 0)) -> Iterator[tuple[tuple[int, int], SourceSpec]]:
        """((platform index, account), source) for every account, from `start` on."""
        for platform_index in range(start[0], len(self.platforms)):
            platform = self.platforms[platform_index]
            first = start[1] if platform_index == start[0] else 0
            for account in range(first, self.size.accounts(platform)):
                yield (platform_index, account), self.generator.source_spec(platform, account)

    def post_keys(self, start: PostKey | None = None) -> Iterator[PostKey]:
        """Every post, platform by platform, account by account, oldest day first."""
        start = start or PostKey(self.platforms[0], 0, 0, 0)
        first_platform = self.platforms.index(start.platform)
        for platform in self.platforms[first_platform:]:
            resume = platform == start.platform
            for account in range(start.account if resume else 0, self.size.accounts(platform)):
                resume_account = resume and account == start.account
                for day in range(start.day if resume_account else 0, len(self.days)):
                    resume_day = resume_account and day == start.day
                    for post in range(start.post if resume_day else 0, self.size.posts_per_day):
                        yield PostKey(platform, account, day, post)

    def post(self, platform: str, account: int, day: int, post: int) -> Generated:
        """One post of one account's day (day 0 = the oldest), with its files and picks."""
        key = PostKey(platform, account, day, post)
        if not (0 <= account < self.size.accounts(platform) and 0 <= day < len(self.days)
                and 0 <= post < self.size.posts_per_day):
            raise IndexError(key)
        return self.generated(key)

    def account_day(self, platform: str, account: int, day: int) -> list[Generated]:
        return [self.post(platform, account, day, post) for post in range(self.size.posts_per_day)]


"""The simulator parts of the built-in platforms: the entry points of this project's
`media_crawler_sim.platforms` group (pyproject.toml; parts.BUILTIN names them too).

Each builds the platform's slice of the demo World (media_crawler_sim/content/<platform>.py) and
mounts its API handlers (media_crawler_sim/api/); together they make the same world, the same
routes in the same order and the same truth as before the platform contract."""
from __future__ import annotations

from media_crawler_sim.content import bilibili as bilibili_content
from media_crawler_sim.content import facebook as facebook_content
from media_crawler_sim.content import urls as urls_content
from media_crawler_sim.content import weibo as weibo_content
from media_crawler_sim.parts import SimulatorPart, SourceSpec

DEMO_TOKEN_ENV = "FB_ACCESS_TOKEN"


def _build_bilibili(world) -> None:
    world.bilibili_users = bilibili_content.build(world.seeded, world.catalog)
    # Keys are what /x/web-interface/nav hands out (file names of wbi_img urls).
    world.wbi_img_key = world.seeded.hex("wbi/img", 32)
    world.wbi_sub_key = world.seeded.hex("wbi/sub", 32)
    videos = {}
    for user in world.bilibili_users.values():
        for video in user.videos:
            videos[video.bvid] = videos[str(video.aid)] = (user, video)
    # The lookup its API asks the world for: the uploader and video of a bvid or aid
    # (a generated world has it as a method, media_crawler_sim/scale/world.py).
    world.bilibili_video = videos.get


def _bilibili_apis(world, cdn) -> tuple:
    from media_crawler_sim.api.bilibili import BilibiliApi

    return (BilibiliApi(world, cdn),)


def _build_weibo(world) -> None:
    world.weibo_users, world.weibo_posts = weibo_content.build(world.seeded, world.catalog)


def _weibo_apis(world, cdn) -> tuple:
    from media_crawler_sim.api.weibo_ajax import WeiboAjaxApi
    from media_crawler_sim.api.weibo_mobile import WeiboMobileApi

    return (WeiboMobileApi(world, cdn), WeiboAjaxApi(world, cdn))


def _build_facebook(world) -> None:
    world.facebook_pages, world.facebook_videos = facebook_content.build(world.seeded, world.catalog)
    posts = {}
    for page in world.facebook_pages.values():
        for post in page.posts:
            posts.setdefault(post.id, post)
    world.facebook_post = posts.get  # as world.bilibili_video above


def _facebook_apis(world, cdn) -> tuple:
    from media_crawler_sim.api.facebook import FacebookApi

    return (FacebookApi(world, cdn),)


def _build_urls(world) -> None:
    world.url_feeds = urls_content.build(world.catalog)


def _urls_apis(world, cdn) -> tuple:
    from media_crawler_sim.api.urls import UrlFeedsApi

    return (UrlFeedsApi(world),)


def _plan_url_faults(world, book) -> None:
    for feed in world.url_feeds.values():
        for item in feed.items:
            if item.fault:
                book.plan(item.file.path, item.fault)


BILIBILI = SimulatorPart(
    build=_build_bilibili,
    apis=_bilibili_apis,
    demo_sources=(SourceSpec("bilibili", f"user {bilibili_content.DEMO_MID}"),),
    fault_sources=(SourceSpec("bilibili", f"user {bilibili_content.BROKEN_FEED_MID}"),),
    # mux off: the simulator's DASH tracks are valid ISO-BMFF boxes but hold no
    # playable samples, so a real ffmpeg would have nothing to mux.
    demo_settings=lambda base_url: {"api_base": f"{base_url}/bilibili", "max_height": 1080, "mux": False},
    generated=True,
)
WEIBO = SimulatorPart(
    build=_build_weibo,
    apis=_weibo_apis,
    demo_sources=(
        SourceSpec("weibo", f"user {weibo_content.MOBILE_UID}"),
        SourceSpec("weibo", f"user {weibo_content.AJAX_UID}", (("api", "ajax"),)),
    ),
    demo_settings=lambda base_url: {"api_base": f"{base_url}/weibo-m", "extra_api_bases": {"ajax": f"{base_url}/weibo"}},
    generated=True,
)
FACEBOOK = SimulatorPart(
    build=_build_facebook,
    apis=_facebook_apis,
    demo_sources=(
        SourceSpec("facebook", f"page {facebook_content.CURSOR_PAGE}"),
        SourceSpec("facebook", f"page {facebook_content.TIME_PAGE}"),
    ),
    demo_settings=lambda base_url: {"api_base": f"{base_url}/facebook/v19.0",
                                    "credential_env": {"access_token": DEMO_TOKEN_ENV}},
    demo_environment=((DEMO_TOKEN_ENV, "demo-token-not-secret"),),
    generated=True,
)
URLS = SimulatorPart(
    build=_build_urls,
    apis=_urls_apis,
    demo_sources=(SourceSpec("urls", "/urls/demo.json"),),
    fault_sources=(SourceSpec("urls", "/urls/html.json"), SourceSpec("urls", "/urls/errors.json")),
    plan_faults=_plan_url_faults,
    generated=True,
)

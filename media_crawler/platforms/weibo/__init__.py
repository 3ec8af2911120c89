"""Weibo: a user's posts (pictures, videos, live photos) through the m. or the ajax API."""
from media_crawler.platform_spec import PlatformSpec, Setting

SPEC = PlatformSpec(
    name="weibo",
    adapter="media_crawler.platforms.weibo.client:WeiboAdapter",
    source_kinds=("user",),
    default_kind="user",
    rate=3.0,
    burst=6.0,
    media_hosts=("*.sinaimg.cn", "*.weibocdn.com"),
    settings=(Setting("max_height", "int", default=1080, minimum=1, doc="the tallest video rendition taken (else the smallest)"),),
    source_options=(("api", ("mobile", "ajax")),),  # the m. API (default) or weibo.com's ajax one
    credential=("cookie", "WEIBO_COOKIE"),
    normalize="media_crawler.platforms.weibo.detect:normalize",
    classify="media_crawler.platforms.weibo.errors:classify_answer",
)

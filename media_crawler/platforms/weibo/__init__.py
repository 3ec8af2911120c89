"""Weibo: a user's posts (pictures, videos, live photos) through the m. or the ajax API."""
from media_crawler.platform_spec import PlatformSpec

SPEC = PlatformSpec(
    name="weibo",
    adapter="media_crawler.platforms.weibo.client:WeiboAdapter",
    source_kinds=("user",),
    default_kind="user",
    rate=3.0,
    burst=6.0,
    media_hosts=("*.sinaimg.cn", "*.weibocdn.com"),
    credential=("cookie", "WEIBO_COOKIE"),
    normalize="media_crawler.platforms.weibo.detect:normalize",
    classify="media_crawler.platforms.weibo.errors:classify_answer",
    simulator="media_crawler.sim.builtin:WEIBO",
)

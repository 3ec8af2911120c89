"""Bilibili: an uploader's videos (covers, DASH video and audio tracks), WBI-signed."""
from media_crawler.platform_spec import PlatformSpec

SPEC = PlatformSpec(
    name="bilibili",
    adapter="media_crawler.platforms.bilibili.client:BilibiliAdapter",
    source_kinds=("user",),
    default_kind="user",
    rate=5.0,
    burst=10.0,
    # biliimg.com: arc/search lists some covers on archive.biliimg.com.
    media_hosts=("*.hdslb.com", "*.bilivideo.com", "*.bilivideo.cn", "*.akamaized.net", "*.biliimg.com"),
    settings=(),  # max_height, codec_order and mux are shared keys (platform_spec.PlatformSettings)
    credential=("sessdata", "BILIBILI_SESSDATA"),
    normalize="media_crawler.platforms.bilibili.detect:normalize",
    normalize_context="media_crawler.platforms.bilibili.detect:context_of",
    classify="media_crawler.platforms.bilibili.errors:classify_envelope",
    simulator="media_crawler.sim.builtin:BILIBILI",
)

"""Bilibili: an uploader's videos (covers, DASH video and audio tracks), WBI-signed."""
from media_crawler.platform_spec import PlatformSpec, Setting

SPEC = PlatformSpec(
    name="bilibili",
    adapter="media_crawler.platforms.bilibili.client:BilibiliAdapter",
    source_kinds=("user",),
    default_kind="user",
    rate=5.0,
    burst=10.0,
    # biliimg.com: arc/search lists some covers on archive.biliimg.com.
    media_hosts=("*.hdslb.com", "*.bilivideo.com", "*.bilivideo.cn", "*.akamaized.net", "*.biliimg.com"),
    settings=(
        Setting("max_height", "int", default=1080, minimum=1, doc="the tallest DASH video track taken (else the smallest)"),
        Setting("codec_order", "names", default=("avc", "hevc", "av1"), doc="video codecs preferred, first to last"),
        Setting("mux", "bool", default=True,
                doc="also commit a muxed MP4 of a DASH video's tracks when ffmpeg is on PATH (pipeline/mux_tracks.py)"),
    ),
    credential=("sessdata", "BILIBILI_SESSDATA"),
    normalize="media_crawler.platforms.bilibili.detect:normalize",
    normalize_context="media_crawler.platforms.bilibili.detect:context_of",
    classify="media_crawler.platforms.bilibili.errors:classify_envelope",
)

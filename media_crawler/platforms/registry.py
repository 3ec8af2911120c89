"""Platform name → adapter class; the one place the pipeline builds adapters."""
from __future__ import annotations

from media_crawler.platforms.base import ApiTransport, PlatformAdapter, PlatformSettings
from media_crawler.platforms.bilibili.client import BilibiliAdapter
from media_crawler.platforms.facebook.client import FacebookAdapter
from media_crawler.platforms.urls.client import UrlsAdapter
from media_crawler.platforms.weibo.client import WeiboAdapter

ADAPTERS: dict[str, type[PlatformAdapter]] = {
    "bilibili": BilibiliAdapter,
    "weibo": WeiboAdapter,
    "facebook": FacebookAdapter,
    "urls": UrlsAdapter,
}


def build_adapter(platform: str, settings: PlatformSettings, transport: ApiTransport) -> PlatformAdapter:
    try:
        adapter_class = ADAPTERS[platform]
    except KeyError:
        raise ValueError(f"unknown platform {platform!r}; expected one of {', '.join(ADAPTERS)}") from None
    return adapter_class(settings, transport)

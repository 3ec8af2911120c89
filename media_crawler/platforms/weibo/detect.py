"""`media-crawler normalize weibo`: getIndex, ajax mymblog / feed statuses and show answers."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

from media_crawler.platforms.base import FeedItem
from media_crawler.platform_spec import PlatformSettings
from media_crawler.platforms.detect import Context, Note
from media_crawler.platforms.fields import dig
from media_crawler.platforms.responses import parse_error
from media_crawler.platforms.weibo import SPEC
from media_crawler.platforms.weibo import normalize as weibo
from media_crawler.platforms.weibo.errors import classify_body


def normalize(
    body: Any, settings: PlatformSettings, now: datetime | None, note: Note, context: Context | None = None
) -> Iterable[FeedItem]:
    if classify_body(body) == "end":
        note({"shape": "weibo end of list"})
        return []
    options = {"now": now, "max_height": SPEC.setting(settings, "max_height")}
    if dig(body, "data", "cards") is not None:
        return weibo.normalize_mblogs(weibo.mblogs_from_getindex(body), api="mobile", **options)
    if dig(body, "data", "list") is not None or dig(body, "statuses") is not None:
        return weibo.normalize_mblogs(weibo.mblogs_from_ajax(body), api="ajax", **options)
    mblog = weibo.mblog_from_show(body)
    if mblog is not None:
        api = "mobile" if mblog is body.get("data") else "ajax"
        return weibo.normalize_mblog(mblog, api=api, **options)
    raise parse_error(weibo.PLATFORM, "unknown Weibo response shape", body)

"""Weibo videos → one record: the best quality under the height limit.

A video is identified by `page_info.object_id` (the post's mid when absent);
its variant is Weibo's quality label (`mp4_720p`), so a later, better rendition is a
new record while the same rendition is never fetched twice. Qualities come
from ajax `playback_list[]` or from named URL fields on either API.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from media_crawler.models import MediaRecord
from media_crawler.platforms.fields import as_float, as_int, as_list, as_str, compact, dig, require
from media_crawler.platforms.weibo.posts import PLATFORM, PostContext, media_url

VIDEO_PAGE = "https://video.weibo.com/show?fid={object_id}"
# Named URL fields and the height their label stands for (hd is 480p, ld/sd 360p).
# HEVC variants (h265_*, hevc_*) are left out: AVC plays everywhere.
NAMED_QUALITIES = (
    ("mp4_1080p_mp4", 1080), ("mp4_720p_mp4", 720), ("mp4_hd_mp4", 480), ("mp4_hd_url", 480),
    ("stream_url_hd", 480), ("mp4_ld_mp4", 360), ("mp4_sd_url", 360), ("stream_url", 360),
)
WEIBO_LABELS = {1080: "mp4_1080p", 720: "mp4_720p", 480: "mp4_hd", 360: "mp4_ld"}
_DIGITS = re.compile(r"(\d{3,4})")


@dataclass(frozen=True)
class Rendition:
    height_class: int  # 1080, 720, 480, 360: the label's number
    url: str
    width: int | None = None
    height: int | None = None

    @property
    def label(self) -> str:
        """Weibo's own rendition name (the `label` of playback_list and of the
        URLs' `label=`): `mp4_720p`, `mp4_hd` (480p), `mp4_ld` (360p)."""
        return WEIBO_LABELS.get(self.height_class, f"mp4_{self.height_class}p")


def is_video(page_info: Any) -> bool:
    return isinstance(page_info, Mapping) and page_info.get("type") == "video"


def renditions(page_info: Mapping[str, Any]) -> list[Rendition]:
    """Every rendition offered, one per quality class (first source wins:
    playback_list, which knows the exact dimensions, comes first)."""
    media_info = page_info.get("media_info") if isinstance(page_info.get("media_info"), Mapping) else {}
    found: dict[int, Rendition] = {}
    for entry in as_list(media_info.get("playback_list")):
        label = as_str(dig(entry, "meta", "quality_label")) or as_str(dig(entry, "play_info", "quality_label"))
        match = _DIGITS.search(label or "")
        url = as_str(dig(entry, "play_info", "url"))
        if match and url:
            height_class = int(match.group(1))
            found.setdefault(height_class, Rendition(
                height_class, url, as_int(dig(entry, "play_info", "width")), as_int(dig(entry, "play_info", "height"))
            ))
    for container in (page_info.get("urls"), media_info):
        for key, height_class in NAMED_QUALITIES:
            url = as_str(dig(container, key))
            if url:
                found.setdefault(height_class, Rendition(height_class, url))
    return sorted(found.values(), key=lambda r: r.height_class, reverse=True)


def choose_rendition(options: list[Rendition], max_height: int) -> Rendition | None:
    """The best rendition whose class fits `max_height`; else the smallest one."""
    fitting = [r for r in options if r.height_class <= max_height]
    if fitting:
        return fitting[0]
    return options[-1] if options else None


def video_record(page_info: Mapping[str, Any], post: PostContext, max_height: int) -> MediaRecord:
    rendition = require(choose_rendition(renditions(page_info), max_height), "page_info video URL")
    object_id = as_str(page_info.get("object_id"))
    page = VIDEO_PAGE.format(object_id=object_id) if object_id else post.url
    media_info = page_info.get("media_info") if isinstance(page_info.get("media_info"), Mapping) else {}
    meta = {
        **post.meta,
        **compact(
            title=video_title(page_info, media_info),
            duration=as_float(media_info.get("duration")),
            width=rendition.width,
            height=rendition.height,
            quality=f"{rendition.height_class}p",
        ),
    }
    return MediaRecord(
        platform=PLATFORM,
        item_id=object_id or post.mid,
        variant=rendition.label,
        kind="video",
        canonical_url=f"{page}#{rendition.label}",
        media_url=media_url(rendition.url),
        published_at=post.published_at,
        group=object_id or post.mid,
        resolve_ref=post.resolve_ref,  # f.video.weibocdn.com URLs are signed (Expires/ssig)
        meta=meta,
    )


def video_title(page_info: Mapping[str, Any], media_info: Mapping[str, Any]) -> str | None:
    """The video's own title: `media_info.titles[]` (the `default` entry, else
    the first), then `video_title`; `page_title` and `name` are the card's
    generic caption (often the post text), the last resort."""
    titles = [entry for entry in as_list(media_info.get("titles")) if isinstance(entry, Mapping)]
    titles.sort(key=lambda entry: entry.get("default") is not True)  # stable: the default first
    for candidate in [*(entry.get("title") for entry in titles), media_info.get("video_title"),
                      page_info.get("title"), page_info.get("page_title"), media_info.get("name")]:
        title = as_str(candidate)
        if title:
            return title
    return None


def post_videos(mblog: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The video page_infos of a post: `page_info`, and mixed-media video items."""
    videos = [mblog["page_info"]] if is_video(mblog.get("page_info")) else []
    for item in as_list(dig(mblog, "mix_media_info", "items")):
        if dig(item, "type") == "video" and isinstance(dig(item, "data"), Mapping):
            videos.append({**item["data"], "type": "video"})
    return videos

"""Weibo pictures → records: one `large` (or `gif`) image per picture, plus
the `live` clip of a live photo.

A picture's identity is its `pid`. The same picture is served from shards
wx1-4/ww1-4/tvax1-4 and in sizes orj360/mw690/bmiddle/large/...; the
canonical URL fixes both so the seen-set sees one picture, not twelve.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import parse_qs, urlsplit, urlunsplit

from media_crawler.models import MediaRecord
from media_crawler.platforms.base import FeedItem
from media_crawler.platforms.fields import MissingField, as_int, as_list, as_str, compact, dig, require
from media_crawler.platforms.items import guarded
from media_crawler.platforms.weibo.posts import PLATFORM, PostContext, media_url

CANONICAL_IMAGE = "https://wx1.sinaimg.cn/large/{pid}.{ext}"
# ajax `pic_infos` sizes, biggest first.
AJAX_SIZES = ("largest", "original", "mw2000", "large", "bmiddle", "thumbnail")
_SIZE_SEGMENT = re.compile(r"^/([a-z]+\d*|crop\.[\d.]+)/")  # /orj360/, /mw690/, /large/, /crop.0.0.1.1.180/


@dataclass(frozen=True)
class Picture:
    pid: str
    url: str
    width: int | None = None
    height: int | None = None
    is_gif: bool = False
    live_url: str | None = None  # the clip of a live photo


def is_sinaimg(url: str) -> bool:
    try:
        return (urlsplit(url).hostname or "").endswith(".sinaimg.cn")
    except ValueError:  # a malformed host: not one of ours
        return False


def upgrade_to_large(url: str) -> str:
    """The `large` size of a sinaimg picture URL; other hosts are left as served."""
    if not is_sinaimg(url):
        return url
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=_SIZE_SEGMENT.sub("/large/", parts.path, count=1)))


def extension(url: str, default: str = "jpg") -> str:
    name = urlsplit(url).path.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[-1].lower() if "." in name else default


def canonical_image_url(pid: str, url: str) -> str:
    return CANONICAL_IMAGE.format(pid=pid, ext=extension(url))


def unwrap_livephoto(url: str | None) -> str | None:
    """m.weibo.cn wraps the clip as `video.weibo.com/media/play?livephoto=<url>`."""
    if not url:
        return None
    wrapped = parse_qs(urlsplit(url).query).get("livephoto")
    return wrapped[0] if wrapped else url


def pictures_of(mblog: Mapping[str, Any]) -> list[tuple[str | None, str, Any]]:
    """(pid, shape, raw picture) for every picture of a post in display order,
    whichever shape the API used: m. `pics[]`, ajax `pic_ids` + `pic_infos`,
    or ajax `mix_media_info` (mixed picture/video posts)."""
    found: list[tuple[str | None, str, Any]] = []
    for pic in as_list(mblog.get("pics")):
        found.append((as_str(dig(pic, "pid")), "mobile", pic))
    infos = mblog.get("pic_infos") if isinstance(mblog.get("pic_infos"), Mapping) else {}
    for pid in as_list(mblog.get("pic_ids")) or list(infos):
        found.append((as_str(pid), "ajax", infos.get(pid)))
    for item in as_list(dig(mblog, "mix_media_info", "items")):
        if dig(item, "type") == "pic":
            found.append((as_str(item.get("id")) or as_str(dig(item, "data", "pic_id")), "ajax", item.get("data")))
    # A post answered in two shapes at once must not yield its pictures twice.
    seen: set[str] = set()
    unique = []
    for pid, shape, raw in found:
        if pid is None or pid not in seen:
            unique.append((pid, shape, raw))
            seen.add(pid or "")
    return unique


def picture_from_mobile(pic: Mapping[str, Any]) -> Picture:
    pid = require(as_str(pic.get("pid")), "pics[].pid")
    url = as_str(dig(pic, "large", "url")) or upgrade_to_large(require(as_str(pic.get("url")), f"pics[{pid}].url"))
    is_live = pic.get("type") == "livephoto" or bool(pic.get("videoSrc"))
    return Picture(
        pid=pid,
        url=url,
        width=as_int(dig(pic, "large", "geo", "width")) or as_int(dig(pic, "geo", "width")),
        height=as_int(dig(pic, "large", "geo", "height")) or as_int(dig(pic, "geo", "height")),
        is_gif=extension(url) == "gif",
        live_url=unwrap_livephoto(as_str(pic.get("videoSrc"))) if is_live else None,
    )


def picture_from_ajax(pid: str | None, info: Any) -> Picture:
    pid = require(pid or as_str(dig(info, "pic_id")), "pic_ids[]")
    if not isinstance(info, Mapping):
        raise MissingField(f"missing pic_infos[{pid}]")
    size = next((info[name] for name in AJAX_SIZES if as_str(dig(info, name, "url"))), None)
    url = upgrade_to_large(require(as_str(dig(size, "url")), f"pic_infos[{pid}] URL"))
    kind = info.get("type")
    return Picture(
        pid=pid,
        url=url,
        width=as_int(dig(size, "width")),
        height=as_int(dig(size, "height")),
        is_gif=kind == "gif" or extension(url) == "gif",
        # For a gif, `video` is an mp4 transcode of the same picture: not archived twice.
        live_url=as_str(info.get("video")) if kind == "livephoto" else None,
    )


def picture_records(picture: Picture, post: PostContext) -> list[MediaRecord]:
    canonical = canonical_image_url(picture.pid, picture.url)
    meta = {**post.meta, **compact(width=picture.width, height=picture.height)}
    image = MediaRecord(
        platform=PLATFORM,
        item_id=picture.pid,
        variant="gif" if picture.is_gif else "large",
        kind="image",
        canonical_url=canonical,
        media_url=media_url(picture.url),
        published_at=post.published_at,
        group=picture.pid if picture.live_url else None,
        meta=meta,
    )
    if not picture.live_url:
        return [image]
    clip = MediaRecord(
        platform=PLATFORM,
        item_id=picture.pid,
        variant="live",
        kind="video",
        canonical_url=f"{canonical}#live",
        media_url=media_url(picture.live_url),
        published_at=post.published_at,
        group=picture.pid,
        resolve_ref=post.resolve_ref,  # the clip URL is signed (Expires/ssig)
        meta={**post.meta},
    )
    return [image, clip]


def post_picture_items(mblog: Mapping[str, Any], post: PostContext) -> list[FeedItem]:
    """Every picture of the post; a broken picture is an ItemError of its own."""
    items: list[FeedItem] = []
    for pid, shape, raw in pictures_of(mblog):
        def build(pid=pid, shape=shape, raw=raw) -> list[MediaRecord]:
            picture = picture_from_mobile(raw) if shape == "mobile" else picture_from_ajax(pid, raw)
            return picture_records(picture, post)

        items += guarded(PLATFORM, pid or post.mid, build)
    return items

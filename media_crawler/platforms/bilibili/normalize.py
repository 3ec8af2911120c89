"""Bilibili responses → MediaRecords. Pure functions of decoded `data` objects.

Identity: a video is its `bvid`, a part `(bvid, cid)`, a stream
`(cid, qn, codecid)`. Records: the cover (`bvid`/`cover`, stable URL), the
chosen DASH video and audio tracks (`bvid:cid`/`video-{qn}-{codecid}`,
`audio-{id}`) or the legacy progressive segments (`durl-{qn}-{order}`).
Stream URLs are signed for ~2 h: tracks carry `resolve_ref`
`playurl:{bvid}:{cid}` so the adapter can fetch fresh ones.

An AI-dubbed answer (`cur_language` set, e.g. "en") carries the dubbed audio
under the original's ids: its audio variant is `audio-{id}-{language}`, a
record of its own. Stream and image URLs on the platform's CDNs are fetched
over https, whatever scheme the answer wrote.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Mapping, Sequence
from urllib.parse import urlsplit, urlunsplit

from media_crawler.models import MediaRecord
from media_crawler.platforms.base import FeedItem
from media_crawler.platforms.bilibili.quality import (
    Stream, audio_variant, parse_stream, select_audio, select_video, video_variant,
)
from media_crawler.platforms.fields import (
    as_float, as_int, as_list, as_size, as_str, compact, dig, from_unix, https_on, require,
)
from media_crawler.platforms.bilibili.ids import aid_to_bvid
from media_crawler.platforms.items import guarded

PLATFORM = "bilibili"
VIDEO_PAGE = "https://www.bilibili.com/video/{bvid}"
_RESIZE_SUFFIX = re.compile(r"@[^/]*$")  # `.jpg@320w_200h_1c.webp` → `.jpg`
_IMAGE_HOSTS = ("hdslb.com", "biliimg.com")
# The stream CDNs (the spec's media_hosts): they serve https as well as http.
_VIDEO_HOSTS = ("bilivideo.com", "bilivideo.cn", "akamaized.net", "hdslb.com")
# `…/upgcxcode/65/46/{cid}/{cid}_…`: stream URLs name the part's cid.
_CID_IN_URL = re.compile(r"/upgcxcode/\d+/\d+/(\d+)/")
_LANGUAGE = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass(frozen=True)
class VideoPart:
    """What a playurl answer needs to become records: which video and part."""

    bvid: str
    cid: str
    page: int = 1
    published_at: datetime | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def item_id(self) -> str:
        return f"{self.bvid}:{self.cid}"

    @property
    def page_url(self) -> str:
        return f"{VIDEO_PAGE.format(bvid=self.bvid)}?p={self.page}"


@dataclass(frozen=True)
class VideoInfo:
    bvid: str
    cover_url: str | None
    published_at: datetime | None
    meta: Mapping[str, Any]
    parts: tuple[VideoPart, ...]


# -- the uploads list (x/space/wbi/arc/search) -------------------------------------------

def arc_search_entries(data: Any) -> list[Mapping[str, Any]]:
    return [entry for entry in as_list(dig(data, "list", "vlist")) if isinstance(entry, Mapping)]


def arc_search_has_more(data: Any, pn: int) -> bool:
    count, ps = as_int(dig(data, "page", "count")), as_int(dig(data, "page", "ps"))
    return count is None or not ps or pn * ps < count


def entry_published_at(entry: Mapping[str, Any]) -> datetime | None:
    return from_unix(entry.get("created"))


def video_bvid(data: Any) -> str | None:
    """The video's bvid: as given, else the one its `aid` encodes to (answers from
    before bvids existed name the aid only); None when it names neither."""
    if not isinstance(data, Mapping):
        return None
    if data.get("bvid") not in (None, ""):
        return as_str(data.get("bvid"))  # a bvid of another type is drift: None, refused by the caller
    aid = as_int(data.get("aid"))
    try:
        return aid_to_bvid(aid) if aid is not None else None
    except ValueError:
        return None


def entry_meta(entry: Mapping[str, Any]) -> dict[str, Any]:
    bvid = video_bvid(entry)
    return compact(
        title=as_str(entry.get("title")),
        text=as_str(entry.get("description")),
        author_id=as_str(entry.get("mid")),
        author_name=as_str(entry.get("author")),
        post_id=bvid,
        post_url=VIDEO_PAGE.format(bvid=bvid) if bvid else None,
    )


def cover_from_entry(entry: Mapping[str, Any]) -> list[MediaRecord]:
    bvid = require(video_bvid(entry), "vlist[].bvid (or aid)")
    return [cover_record(bvid, require(as_str(entry.get("pic")), "vlist[].pic"), entry_published_at(entry), entry_meta(entry))]


def covers_from_arc_search(data: Any) -> list[FeedItem]:
    items: list[FeedItem] = []
    for entry in arc_search_entries(data):
        items += guarded(PLATFORM, video_bvid(entry), lambda entry=entry: cover_from_entry(entry))
    return items


def cover_record(bvid: str, pic: str, published_at: datetime | None, meta: Mapping[str, Any]) -> MediaRecord:
    """Covers live on i0/i1/i2.hdslb.com without a signature: stable, no resolve_ref."""
    return MediaRecord(
        platform=PLATFORM,
        item_id=bvid,
        variant="cover",
        kind="image",
        canonical_url=f"{VIDEO_PAGE.format(bvid=bvid)}#cover",
        media_url=original_image_url(pic),
        published_at=published_at,
        group=bvid,
        meta=dict(meta),
    )


def original_image_url(url: str) -> str:
    """Strip the `@…` resize suffix; protocol-relative and http image-CDN URLs become https."""
    if url.startswith("//"):
        url = "https:" + url
    try:
        parts = urlsplit(url)
    except ValueError:  # a malformed host: the download refuses it as it is
        return url
    path = _RESIZE_SUFFIX.sub("", parts.path)
    return https_on(urlunsplit((parts.scheme, parts.netloc, path, parts.query, parts.fragment)), _IMAGE_HOSTS)


def stream_url(url: str) -> str:
    """A stream URL as fetched: https on the video CDNs, else as served."""
    return https_on(url, _VIDEO_HOSTS)


# -- one video (x/web-interface/view, x/player/pagelist) ---------------------------------

def video_info_from_view(data: Any) -> VideoInfo:
    bvid = require(video_bvid(data), "data.bvid (or data.aid)")
    published_at = from_unix(data.get("pubdate"))
    meta = compact(
        title=as_str(data.get("title")),
        text=as_str(data.get("desc")),
        author_id=as_str(dig(data, "owner", "mid")),
        author_name=as_str(dig(data, "owner", "name")),
        post_id=bvid,
        post_url=VIDEO_PAGE.format(bvid=bvid),
        duration=as_float(data.get("duration")),
    )
    parts = parts_from_pages(data.get("pages"), bvid, published_at, meta)
    cid = as_str(data.get("cid"))
    if not parts and cid:  # a single-part video answered without pages[]
        parts = (VideoPart(bvid, cid, 1, published_at, meta),)
    return VideoInfo(bvid, as_str(data.get("pic")), published_at, meta, parts)


def parts_from_pages(
    pages: Any, bvid: str, published_at: datetime | None, video_meta: Mapping[str, Any]
) -> tuple[VideoPart, ...]:
    """view.pages[] and x/player/pagelist `data` share this shape."""
    parts = []
    for index, page in enumerate(as_list(pages), start=1):
        cid = as_str(dig(page, "cid"))
        if not cid:
            continue
        meta = {
            **video_meta,
            **compact(
                part=as_str(page.get("part")),
                duration=as_float(page.get("duration")),
                width=as_int(dig(page, "dimension", "width")),
                height=as_int(dig(page, "dimension", "height")),
            ),
        }
        number = as_int(page.get("page"))
        parts.append(VideoPart(bvid, cid, number if number and 0 < number < 100_000 else index, published_at, meta))
    return tuple(parts)


def playurl_cid(data: Any) -> str | None:
    """The cid a playurl answer is for, when the answer says: `cid`, a non-zero
    `last_play_cid`, or the `upgcxcode/…/{cid}/` directory of its stream URLs."""
    for key in ("cid", "last_play_cid"):
        cid = as_str(dig(data, key))
        if cid and cid != "0":
            return cid
    urls = [as_str(dig(stream, "baseUrl")) or as_str(dig(stream, "base_url"))
            for stream in _mappings(dig(data, "dash", "video")) + _mappings(dig(data, "dash", "audio"))]
    urls += [as_str(dig(segment, "url")) for segment in _mappings(dig(data, "durl"))]
    for url in urls:
        match = _CID_IN_URL.search(url or "")
        if match:
            return match.group(1)
    return None


def playurl_language(data: Any) -> str | None:
    """The dubbed language of an AI-dubbed answer (`cur_language`), None for the original."""
    language = _LANGUAGE.sub("", as_str(dig(data, "cur_language")) or "")[:16]
    return language or None


# -- streams (x/player/wbi/playurl) ------------------------------------------------------

def is_playurl(data: Any) -> bool:
    """A playurl `data` object: it carries DASH streams or progressive segments."""
    return isinstance(data, Mapping) and (data.get("dash") is not None or data.get("durl") is not None)


def dash_streams(data: Any) -> tuple[list[Stream], list[Stream]]:
    videos = [s for s in map(parse_stream, _mappings(dig(data, "dash", "video"))) if s]
    audios = [s for s in map(parse_stream, _mappings(dig(data, "dash", "audio"))) if s]  # audio may be null
    return videos, audios


def records_from_playurl(
    data: Any, part: VideoPart, max_height: int, codec_order: Sequence[str]
) -> list[MediaRecord]:
    """The records to download for one part: the selected DASH pair, or every
    progressive segment when the answer is legacy `durl[]`."""
    if isinstance(dig(data, "dash"), Mapping):
        videos, audios = dash_streams(data)
        video = select_video(videos, max_height, codec_order)
        audio = select_audio(audios)
        language = playurl_language(data)
        records = [track_record(part, video, "video")] if video else []
        records += [track_record(part, audio, "audio", language)] if audio else []
        return require(records, f"playurl stream with a URL for {part.item_id}")
    return require(durl_records(data, part), f"playurl dash or durl for {part.item_id}")


def all_stream_records(data: Any, part: VideoPart) -> list[MediaRecord]:
    """Every stream the answer offers (re-resolution looks for the same variant)."""
    videos, audios = dash_streams(data)
    language = playurl_language(data)
    return (
        [track_record(part, s, "video") for s in videos]
        + [track_record(part, s, "audio", language) for s in audios]
        + durl_records(data, part)
    )


def track_record(part: VideoPart, stream: Stream, kind: str, language: str | None = None) -> MediaRecord:
    """One DASH track. `language`: the dub an audio track speaks (None: the original)."""
    is_video = kind == "video"
    variant = video_variant(stream) if is_video else audio_variant(stream)
    if language and not is_video:
        variant = f"{variant}-{language}"
    # The part's dimensions describe the picture: an audio track has none.
    meta = {key: value for key, value in part.meta.items() if is_video or key not in ("width", "height")}
    meta.update(compact(quality=stream.qn, codec=stream.codec_name, codecs=stream.codecs,
                        bandwidth=stream.bandwidth or None, mime_type=stream.mime_type))
    if is_video:
        meta.update(compact(width=stream.width, height=stream.height))
    elif language:
        meta["language"] = language
    return _part_record(part, variant, kind, stream.url, stream.backup_urls, meta)


def durl_records(data: Any, part: VideoPart) -> list[MediaRecord]:
    qn = as_int(dig(data, "quality")) or 0
    records = []
    for index, segment in enumerate(_mappings(dig(data, "durl")), start=1):
        url = as_str(segment.get("url"))
        if not url:
            continue
        order = as_int(segment.get("order")) or index
        backups = tuple(u for u in map(as_str, as_list(segment.get("backup_url"))) if u and u != url)
        length_ms = as_float(segment.get("length"))
        meta = {**part.meta, **compact(quality=qn, segment=order,
                                       duration=length_ms / 1000 if length_ms else None)}
        record = _part_record(part, f"durl-{qn}-{order}", "video", url, backups, meta)
        records.append(replace(record, expected_size=as_size(segment.get("size"))))
    return records


def _part_record(
    part: VideoPart, variant: str, kind: str, url: str, backups: tuple[str, ...], meta: Mapping[str, Any]
) -> MediaRecord:
    return MediaRecord(
        platform=PLATFORM,
        item_id=part.item_id,
        variant=variant,
        kind=kind,
        canonical_url=f"{part.page_url}#{variant}",
        media_url=stream_url(url),
        published_at=part.published_at,
        backup_urls=tuple(stream_url(backup) for backup in backups),
        group=part.item_id,
        resolve_ref=f"playurl:{part.bvid}:{part.cid}",
        meta=dict(meta),
    )


def _mappings(value: Any) -> list[Mapping[str, Any]]:
    return [item for item in as_list(value) if isinstance(item, Mapping)]

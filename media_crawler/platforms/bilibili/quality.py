"""Which DASH streams to download: the best video under a height limit in the
preferred codec, plus the best audio track.

Bilibili lists every quality once per codec (`id` = qn, `codecid` 7 AVC,
12 HEVC, 13 AV1). Selection goes by height rather than by qn because the qn
table grows (HDR, Dolby, 8K sit above 4K with no height order) and height is
what the user's `max_height` limits.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from media_crawler.platforms.fields import as_int, as_list, as_str

CODEC_IDS = {"avc": 7, "hevc": 12, "av1": 13}
CODEC_NAMES = {codec_id: name for name, codec_id in CODEC_IDS.items()}


@dataclass(frozen=True)
class Stream:
    """One DASH representation (video or audio), as the normalizer needs it."""

    qn: int  # `id`: the quality number for video, the audio id for audio
    codecid: int | None
    url: str
    backup_urls: tuple[str, ...]
    bandwidth: int
    width: int | None
    height: int | None
    codecs: str | None
    mime_type: str | None

    @property
    def codec_name(self) -> str | None:
        return CODEC_NAMES.get(self.codecid) if self.codecid is not None else None


def parse_stream(raw: Mapping[str, Any]) -> Stream | None:
    """A stream from its JSON, or None when it has no id or no URL (unusable)."""
    qn = as_int(raw.get("id"))
    url = as_str(raw.get("baseUrl")) or as_str(raw.get("base_url"))
    if qn is None or not url:
        return None
    backups = as_list(raw.get("backupUrl")) or as_list(raw.get("backup_url"))
    return Stream(
        qn=qn,
        codecid=as_int(raw.get("codecid")),
        url=url,
        backup_urls=tuple(u for u in map(as_str, backups) if u and u != url),
        bandwidth=as_int(raw.get("bandwidth")) or 0,
        width=as_int(raw.get("width")),
        height=as_int(raw.get("height")),
        codecs=as_str(raw.get("codecs")),
        mime_type=as_str(raw.get("mimeType")) or as_str(raw.get("mime_type")),
    )


def select_video(streams: Iterable[Stream], max_height: int, codec_order: Sequence[str]) -> Stream | None:
    """The tallest stream not above `max_height`; among equals the earliest
    codec in `codec_order`, then the higher bitrate.

    When nothing fits under the limit the smallest stream is taken: a video
    that only exists in 1080p is still archived under a 720p limit, rather
    than silently skipped.
    """
    candidates = list(streams)
    if not candidates:
        return None
    fitting = [s for s in candidates if (s.height or 0) <= max_height]
    if not fitting:
        smallest = min(s.height or 0 for s in candidates)
        fitting = [s for s in candidates if (s.height or 0) == smallest]
    tallest = max(s.height or 0 for s in fitting)
    same_height = [s for s in fitting if (s.height or 0) == tallest]
    preference = [CODEC_IDS[name] for name in codec_order if name in CODEC_IDS]

    def rank(stream: Stream) -> tuple[int, int, int]:
        codec_rank = preference.index(stream.codecid) if stream.codecid in preference else len(preference)
        return (codec_rank, -stream.qn, -stream.bandwidth)

    return min(same_height, key=rank)


def select_audio(streams: Iterable[Stream]) -> Stream | None:
    """The highest-bandwidth audio track (ties: the higher id)."""
    return max(streams, key=lambda s: (s.bandwidth, s.qn), default=None)


def video_variant(stream: Stream) -> str:
    return f"video-{stream.qn}-{stream.codecid if stream.codecid is not None else 0}"


def audio_variant(stream: Stream) -> str:
    return f"audio-{stream.qn}"

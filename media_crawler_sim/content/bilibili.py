"""Bilibili demo content: user 12345's uploads and the broken-feed user 666.

Plan (slot = day 0..2 of the three days ending --end-date):
  slot 0  one single-part DASH video
  slot 1  one three-part DASH video (3 cids)
  slot 2  one legacy video that only offers progressive `durl[]`, one single-part DASH video
Every DASH part offers qn 16/32/64/80/112 (360p..1080p+) in AVC (codecid 7) and HEVC
(codecid 12) plus audio 30216 and 30280. Picks = the cover, and per part the best track
with height <= 1080 in the preferred codec (qn 112, AVC) + the best audio (30280).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from media_crawler_sim.catalog import ALTERNATE, PICK, BILIBILI_VIDEO, MediaCatalog, MediaFile, PostFiles, SourceFiles
from media_crawler_sim.media import Recipe, dash_segment_base
from media_crawler_sim.seeded import BV_ALPHABET, Seeded

DEMO_MID = 12345
BROKEN_FEED_MID = 666

# qn -> (width, height, AVC codec string, bytes of the AVC track)
QUALITIES = {
    16: (640, 360, "avc1.64001E", 6_000),
    32: (852, 480, "avc1.64001F", 9_000),
    64: (1280, 720, "avc1.640028", 14_000),
    80: (1920, 1080, "avc1.640032", 22_000),
    112: (1920, 1080, "avc1.640032", 30_000),
}
HEVC_CODECS = "hev1.1.6.L150.90"
AVC, HEVC = 7, 12
# audio id -> (bandwidth, bytes)
AUDIO = {30216: (67_125, 5_000), 30280: (192_045, 9_000)}
PICK_VIDEO, PICK_AUDIO = (112, AVC), 30280
LEGACY_QN = 64

# (slot, UTC hour, number of parts, legacy durl only)
VIDEO_PLAN = ((0, 9, 1, False), (1, 14, 3, False), (2, 6, 1, True), (2, 20, 1, False))


@dataclass(frozen=True)
class DashTrack:
    file: MediaFile
    track_id: int  # qn for video, audio id for audio
    codecid: int  # 7 AVC, 12 HEVC, 0 audio
    width: int
    height: int
    bandwidth: int
    codecs: str
    segment_base: tuple[str, str]  # (Initialization, indexRange)


@dataclass(frozen=True)
class Part:
    cid: int
    page: int
    title: str
    duration: int
    video: tuple[DashTrack, ...]
    audio: tuple[DashTrack, ...]
    progressive: MediaFile | None  # the legacy durl file


@dataclass(frozen=True)
class Video:
    bvid: str
    aid: int
    title: str
    description: str
    published: datetime
    cover: MediaFile
    parts: tuple[Part, ...]

    @property
    def duration(self) -> int:
        return sum(part.duration for part in self.parts)


@dataclass(frozen=True)
class User:
    mid: int
    name: str
    videos: tuple[Video, ...]  # newest first
    broken_feed: bool = False


def build(seeded: Seeded, catalog: MediaCatalog) -> dict[int, User]:
    files = SourceFiles(catalog, "bilibili", f"bilibili: user {DEMO_MID}")
    videos = [_video(seeded, files, index, *plan) for index, plan in enumerate(VIDEO_PLAN)]
    videos.sort(key=lambda video: video.published, reverse=True)
    return {
        DEMO_MID: User(DEMO_MID, "sim-uploader", tuple(videos)),
        BROKEN_FEED_MID: User(BROKEN_FEED_MID, "sim-broken", (), broken_feed=True),
    }


def _video(seeded: Seeded, files: SourceFiles, index: int, slot: int, hour: int, part_count: int, legacy: bool) -> Video:
    key = f"bilibili/{DEMO_MID}/{index}"
    bvid = "BV1" + seeded.text(key + "/bvid", 9, BV_ALPHABET)
    published = seeded.moment(slot, key, hour)
    video_files = files.of_post(bvid, published.date())
    cover_hash = seeded.hex(key + "/cover", 40)
    cover = video_files.add(
        f"/media/bilibili/bfs/archive/{cover_hash}.jpg",
        Recipe("jpeg", key + "/cover", 640 + 40 * index, 360 + 30 * index),
        kind="image", item=bvid, variant="cover",
    )
    parts = tuple(_part(seeded, video_files, key, bvid, page, legacy) for page in range(1, part_count + 1))
    aid = seeded.number(key + "/aid", 9)
    return Video(bvid, aid, f"sim video {index + 1}", f"simulated upload {index + 1}", published, cover, parts)


def _part(seeded: Seeded, files: PostFiles, key: str, bvid: str, page: int, legacy: bool) -> Part:
    cid = seeded.number(f"{key}/cid/{page}", 9)
    item = f"{bvid}:{cid}"
    directory = f"/media/bilibili/upgcxcode/{cid % 100:02d}/{cid // 100 % 100:02d}/{cid}"
    duration = 30 + seeded.rng(f"{key}/duration/{page}").randint(0, 300)
    title = f"part {page}"
    if legacy:
        progressive = files.add(
            f"{directory}/{cid}_nb2-1-{LEGACY_QN}.mp4",
            Recipe("mp4", f"{item}/durl", 1280, 720, 250_000),
            kind="video", item=item, variant=f"durl-{LEGACY_QN}-1", cdn=BILIBILI_VIDEO,
        )
        return Part(cid, page, title, duration, (), (), progressive)
    video = []
    for codecid in (AVC, HEVC):
        for qn, (width, height, avc_codecs, size) in QUALITIES.items():
            file_id = (30000 if codecid == AVC else 100000) + qn
            recipe = Recipe("m4s-video", f"{item}/{qn}/{codecid}", width, height, size if codecid == AVC else size * 3 // 4)
            file = files.add(
                f"{directory}/{cid}_nb3-1-{file_id}.m4s", recipe,
                kind="video", item=item, variant=f"video-{qn}-{codecid}", cdn=BILIBILI_VIDEO, role=PICK if (qn, codecid) == PICK_VIDEO else ALTERNATE,
            )
            codecs = avc_codecs if codecid == AVC else HEVC_CODECS
            bandwidth = recipe.size * 8 * 100
            video.append(DashTrack(file, qn, codecid, width, height, bandwidth, codecs, dash_segment_base(recipe)))
    audio = []
    for audio_id, (bandwidth, size) in AUDIO.items():
        recipe = Recipe("m4s-audio", f"{item}/{audio_id}", size=size)
        file = files.add(
            f"{directory}/{cid}_nb3-1-{audio_id}.m4s", recipe,
            kind="audio", item=item, variant=f"audio-{audio_id}", cdn=BILIBILI_VIDEO, role=PICK if audio_id == PICK_AUDIO else ALTERNATE,
        )
        audio.append(DashTrack(file, audio_id, 0, 0, 0, bandwidth, "mp4a.40.2", dash_segment_base(recipe)))
    # Real answers list the best quality first.
    video.sort(key=lambda track: (-track.track_id, track.codecid))
    audio.sort(key=lambda track: -track.bandwidth)
    return Part(cid, page, title, duration, tuple(video), tuple(audio), None)

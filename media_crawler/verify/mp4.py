"""ISO-BMFF (MP4, DASH .m4s) structure check: a walk over the top-level boxes.

Each box header is read with a seek, never the payload, so checking a 2 GB
video costs a few hundred small reads. The walk catches what a truncated or
spliced download looks like: a box running past the end of the file, sizes
that do not add up to the file length, or a file missing the boxes that carry
the media (`mdat`) or describe it (`moov`; `moof`/`sidx` for fragments).
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from media_crawler.errors import CrawlError, ErrorClass

# A complete file opens with ftyp; a DASH media segment with styp, or sidx /
# moof when the packager left the segment type out.
FIRST_BOX_TYPES = ("ftyp", "styp", "sidx", "moof")
SEGMENT_FIRST_BOX_TYPES = ("styp", "sidx", "moof")
MOVIE_BOX_TYPES = ("moov", "moof", "sidx")  # describes the samples: whole movie or fragments


@dataclass(frozen=True)
class Box:
    type: str
    offset: int
    size: int  # whole box, header included


def walk_top_level_boxes(path: str | os.PathLike) -> list[Box]:
    """The top-level boxes; CrawlError(corrupt_media) when the layout is inconsistent."""
    path = Path(path)
    file_size = path.stat().st_size
    boxes: list[Box] = []
    with open(path, "rb") as handle:
        offset = 0
        while offset < file_size:
            boxes.append(_read_box_header(handle, offset, file_size))
            offset += boxes[-1].size
    return boxes


def verify_mp4(path: str | os.PathLike, *, require_movie: bool = True) -> list[Box]:
    """Raise CrawlError(corrupt_media) unless the file is a structurally whole MP4 or DASH segment.

    require_movie=False accepts a file without moov/moof/sidx as long as its
    boxes are whole and add up (a missing moov is what a progressive MP4 cut
    before its index looks like; for bytes whose announced sha256 matched, no
    cut is possible, and the file is exactly what the source published).
    """
    boxes = walk_top_level_boxes(path)
    if not boxes:
        raise CrawlError(ErrorClass.CORRUPT_MEDIA, "empty MP4")
    types = [box.type for box in boxes]
    if types[0] not in FIRST_BOX_TYPES:
        raise CrawlError(ErrorClass.CORRUPT_MEDIA, f"MP4 starts with {types[0]!r}, not ftyp/styp")
    if require_movie and not any(t in MOVIE_BOX_TYPES for t in types):
        raise CrawlError(ErrorClass.CORRUPT_MEDIA, "MP4 has no moov (or moof/sidx for a fragment)")
    if types[0] in SEGMENT_FIRST_BOX_TYPES and "moof" not in types:
        raise CrawlError(ErrorClass.CORRUPT_MEDIA, "DASH segment has no moof")
    if "mdat" not in types:
        raise CrawlError(ErrorClass.CORRUPT_MEDIA, "MP4 has no mdat: no media data")
    return boxes


def _read_box_header(handle, offset: int, file_size: int) -> Box:
    handle.seek(offset)
    header = handle.read(8)
    if len(header) < 8:
        raise CrawlError(ErrorClass.CORRUPT_MEDIA, f"MP4 ends inside a box header at byte {offset}")
    size, raw_type = struct.unpack(">I4s", header)
    box_type = _box_type(raw_type, offset)
    header_size = 8
    if size == 1:  # 64-bit largesize follows the type
        large = handle.read(8)
        if len(large) < 8:
            raise CrawlError(ErrorClass.CORRUPT_MEDIA, f"MP4 ends inside a 64-bit box header at byte {offset}")
        size = struct.unpack(">Q", large)[0]
        header_size = 16
    elif size == 0:  # "extends to the end of the file": only legal for the last box
        size = file_size - offset
    if size < header_size:
        raise CrawlError(ErrorClass.CORRUPT_MEDIA, f"MP4 box {box_type!r} at byte {offset} has impossible size {size}")
    if offset + size > file_size:
        raise CrawlError(
            ErrorClass.CORRUPT_MEDIA,
            f"MP4 box {box_type!r} at byte {offset} needs {size} bytes but the file ends at {file_size} (cut body)",
        )
    return Box(box_type, offset, size)


def _box_type(raw: bytes, offset: int) -> str:
    # Box types are four printable ASCII characters (Apple's '©xyz' never
    # appears at top level); anything else means we are reading payload bytes.
    if not all(0x20 <= byte < 0x7F for byte in raw):
        raise CrawlError(ErrorClass.CORRUPT_MEDIA, f"MP4 has garbage where a box type belongs at byte {offset}")
    return raw.decode("ascii")

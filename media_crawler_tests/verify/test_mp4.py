"""The ISO-BMFF top-level box walk: whole files, DASH segments, 64-bit sizes, and the layouts of cut or foreign files."""
from __future__ import annotations

import struct

import pytest

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.verify.mp4 import verify_mp4, walk_top_level_boxes
from media_crawler_tests.verify.media import FTYP, MDAT, MOOV, STYP, box, mp4


def write(tmp_path, data: bytes):
    path = tmp_path / "video.mp4"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    "layout",
    [
        mp4(FTYP, MOOV, MDAT),
        mp4(FTYP, MDAT, MOOV),  # moov at the end (not fast-start)
        mp4(FTYP, box("free", b"\x00" * 9), MOOV, MDAT),
        mp4(FTYP, MOOV, box("mdat", b"x" * 40, large=True)),  # 64-bit largesize
        mp4(FTYP, MOOV, struct.pack(">I4s", 0, b"mdat") + b"to the end of the file"),  # size 0: last box
        mp4(FTYP, MOOV, box("sidx"), box("moof"), MDAT, box("moof"), MDAT),  # Bilibili-style fragmented m4s
        mp4(STYP, box("sidx"), box("moof"), MDAT),  # DASH media segment
        mp4(box("moof"), MDAT),  # segment without styp
    ],
)
def test_valid_structures_pass(tmp_path, layout):
    boxes = verify_mp4(write(tmp_path, layout))
    assert sum(b.size for b in boxes) == len(layout)


@pytest.mark.parametrize(
    "layout, reason",
    [
        (mp4(FTYP, MOOV, MDAT)[:-5], "file ends"),  # cut inside mdat
        (mp4(FTYP, MOOV, MDAT) + b"\x00\x00\x00", "header"),  # trailing half box header
        (mp4(FTYP, MDAT), "moov"),
        (mp4(FTYP, MOOV), "mdat"),
        (mp4(STYP, box("sidx"), MDAT), "moof"),
        (mp4(MOOV, FTYP, MDAT), "starts with"),
        (mp4(FTYP, struct.pack(">I4s", 4, b"moov"), MDAT), "impossible size"),
        (mp4(FTYP, b"\x00\x00\x00\x10\xff\xfe\x00\x01" + b"\x00" * 8, MDAT), "garbage"),
        (mp4(FTYP, MOOV, box("mdat", b"x" * 40, large=True)[:-1]), "file ends"),
        (b"", "empty"),
    ],
)
def test_broken_structures_are_corrupt(tmp_path, layout, reason):
    with pytest.raises(CrawlError) as caught:
        verify_mp4(write(tmp_path, layout))
    assert caught.value.error_class is ErrorClass.CORRUPT_MEDIA and reason in caught.value.message


def test_the_walk_reads_headers_only(tmp_path):
    layout = mp4(FTYP, MOOV, box("mdat", b"\x00" * 5_000_000))
    boxes = walk_top_level_boxes(write(tmp_path, layout))
    assert [(b.type, b.size) for b in boxes] == [("ftyp", len(FTYP)), ("moov", len(MOOV)), ("mdat", 5_000_008)]

"""ISO-BMFF verification: whole files, fragmented files and DASH segments pass; cuts, empty or
missing sample tables, chunks outside the media data, zeroed media, fragments without samples and
box floods are corrupt_media, with memory bounded."""
from __future__ import annotations

import struct

import pytest

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.verify.mp4 import MAX_TOP_LEVEL_BOXES, verify_mp4
from media_crawler_sim.hostile.builders import (FRAGMENTED_MOOV, FTYP, MDAT, MOOF, MOOV, STYP, box, fragment, mp4,
                                              movie_box, sample_table)


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
        mp4(FTYP, FRAGMENTED_MOOV, box("sidx"), MOOF, MDAT, MOOF, MDAT),  # Bilibili-style fragmented m4s
        mp4(STYP, box("sidx"), MOOF, MDAT),  # DASH media segment
        mp4(MOOF, MDAT),  # segment without styp
    ],
)
def test_valid_structures_pass(tmp_path, layout):
    verify_mp4(write(tmp_path, layout))


@pytest.mark.parametrize(
    "layout, reason",
    [
        (mp4(FTYP, MOOV, MDAT)[:-5], "file ends"),  # cut inside mdat
        (mp4(FTYP, MOOV, MDAT) + b"\x00\x00\x00", "header"),  # trailing half box header
        (mp4(FTYP, MDAT), "no moov"),
        (mp4(FTYP, MOOV), "mdat"),
        (mp4(STYP, box("sidx"), MDAT), "moof"),
        (mp4(MOOV, FTYP, MDAT), "starts with"),
        (mp4(FTYP, struct.pack(">I4s", 4, b"moov"), MDAT), "impossible size"),
        (mp4(FTYP, b"\x00\x00\x00\x10\xff\xfe\x00\x01" + b"\x00" * 8, MDAT), "garbage"),
        (mp4(FTYP, MOOV, box("mdat", b"x" * 40, large=True)[:-1]), "file ends"),
        (b"", "empty"),
        (mp4(FTYP, box("moov", box("mvhd", b"\x00" * 100)), MDAT), "no track"),  # an empty moov
        (mp4(FTYP, movie_box(()), MDAT), "empty"),  # a sample table with no samples
        (mp4(FTYP, movie_box((10_000,)), MDAT), "samples need"),  # sizes the mdat cannot hold
        (mp4(FTYP, box("moov", box("trak", box("mdia", box("minf", sample_table(chunk_offset=struct.pack(">I", 3)))))),
             MDAT), "outside every mdat"),
        (mp4(FTYP, MOOV, box("mdat", b"\x00" * 4096)), "all zeros"),  # a zeroed mdat
        (mp4(FTYP, FRAGMENTED_MOOV, fragment(0), MDAT), "no moof carries samples"),
        (mp4(FTYP, FRAGMENTED_MOOV, MOOF, MDAT, MOOF), "no mdat after"),
        (mp4(STYP, fragment(0), MDAT), "no moof with samples"),
        (mp4(FTYP, MOOV, MOOV, MDAT), "two moov"),
    ],
)
def test_broken_structures_are_corrupt(tmp_path, layout, reason):
    with pytest.raises(CrawlError) as caught:
        verify_mp4(write(tmp_path, layout))
    assert caught.value.error_class is ErrorClass.CORRUPT_MEDIA and reason in caught.value.message


def test_a_box_flood_is_refused_at_a_bound(tmp_path):
    """Millions of 8-byte boxes: the walk keeps no list, and stops at MAX_TOP_LEVEL_BOXES."""
    flood = mp4(FTYP, MOOV, MDAT) + box("free") * (MAX_TOP_LEVEL_BOXES + 10)
    with pytest.raises(CrawlError) as caught:
        verify_mp4(write(tmp_path, flood))
    assert "box flood" in caught.value.message


def test_an_index_box_claiming_more_entries_than_it_holds_is_corrupt(tmp_path):
    lying = box("stbl", box("stsz", struct.pack(">III", 0, 0, 0xFFFFFFFF)) + box("stco", struct.pack(">II", 0, 1)))
    layout = mp4(FTYP, box("moov", box("trak", box("mdia", box("minf", lying)))), MDAT)
    with pytest.raises(CrawlError) as caught:
        verify_mp4(write(tmp_path, layout))
    assert caught.value.error_class is ErrorClass.CORRUPT_MEDIA

"""ISO-BMFF verification: whole files, fragmented files and DASH segments pass; cuts, empty or
missing sample tables, chunks outside the media data, zeroed media, fragments without samples and
box floods are corrupt_media, with memory bounded."""
from __future__ import annotations

import struct

import pytest

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.verify.mp4 import MAX_TOP_LEVEL_BOXES, verify_mp4
from media_crawler_sim.hostile.builders import (CHUNK_OFFSET_SENTINEL, FRAGMENTED_MOOV, FTYP, MDAT, MOOF, MOOV, STYP,
                                                box, fragment, full_box, movie_box, mp4, sample_table)


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


def moov_with(stbl: bytes, *extra: bytes) -> bytes:
    """A moov of one track whose sample table is `stbl`, then `extra` boxes inside the moov."""
    trak = box("trak", box("mdia", box("minf", stbl)))
    return box("moov", box("mvhd", b"\x00" * 100) + trak + b"".join(extra))


def stz2(field_size: int, sizes: list[int], count: int | None = None) -> bytes:
    """A compact sample size box: `field_size`-bit entries (4-bit ones two to a byte)."""
    if field_size == 16:
        table = b"".join(struct.pack(">H", size) for size in sizes)
    elif field_size == 8:
        table = bytes(sizes)
    else:
        padded = sizes + [0] * (len(sizes) % 2)
        table = bytes((padded[i] << 4) | padded[i + 1] for i in range(0, len(padded), 2))
    return full_box("stz2", struct.pack(">I", field_size) + struct.pack(">I", len(sizes) if count is None else count)
                    + table)


STCO = full_box("stco", struct.pack(">I", 1) + CHUNK_OFFSET_SENTINEL)
MDAT_25 = MDAT  # its payload is 25 bytes


@pytest.mark.parametrize("stbl", [
    box("stbl", stz2(16, [10, 15]) + STCO),
    box("stbl", stz2(8, [10, 15]) + STCO),
    box("stbl", stz2(4, [10, 15]) + STCO),
    box("stbl", stz2(4, [9, 9, 7]) + STCO),  # an odd count: the last byte's low half is padding
    box("stbl", full_box("stz2", struct.pack(">II", 8, 2) + b"\x0a\x0f\x99") + STCO),  # bytes after the entries
    box("stbl", full_box("stz2", struct.pack(">II", 4, 2) + b"\xaf\x99") + STCO),  # are not entries
    sample_table((25,)),  # the samples fill the mdat exactly
    box("stbl", full_box("stsz", struct.pack(">II", 5, 5)) + STCO),  # five uniform 5-byte samples: 25
], ids=["stz2 16-bit", "stz2 8-bit", "stz2 4-bit", "stz2 4-bit odd", "stz2 8-bit, trailing byte",
        "stz2 4-bit, trailing byte", "exactly the mdat", "uniform sizes"])
def test_every_sample_size_box_that_fits_the_media_data_passes(tmp_path, stbl):
    verify_mp4(write(tmp_path, mp4(FTYP, moov_with(stbl), MDAT_25)))


@pytest.mark.parametrize(("stbl", "reason"), [
    (box("stbl", stz2(16, [10, 16]) + STCO), "samples need 26 bytes"),
    (box("stbl", stz2(8, [10, 16]) + STCO), "samples need 26 bytes"),
    (box("stbl", stz2(4, [10, 15, 1]) + STCO), "samples need 26 bytes"),
    (box("stbl", full_box("stsz", struct.pack(">II", 5, 6)) + STCO), "samples need 30 bytes"),
    (box("stbl", stz2(5, [10, 15]) + STCO), "stz2 is malformed"),
    (box("stbl", full_box("stz2", struct.pack(">II", 5, 2) + b"\x00" * 4) + STCO), "stz2 is malformed"),  # room enough
    (box("stbl", full_box("stz2", struct.pack(">II", 8, 2) + b"\x01") + STCO), "stz2 is malformed"),  # a byte short
    (box("stbl", full_box("stz2", struct.pack(">II", 4, 3) + b"\x11") + STCO), "stz2 is malformed"),
    (box("stbl", full_box("stz2", struct.pack(">II", 16, 8) + b"\x00" * 15) + STCO), "stz2 is malformed"),
    (box("stbl", stz2(16, [10, 15], count=3) + STCO), "stz2 is malformed"),  # more entries than it holds
    (box("stbl", full_box("stsz", struct.pack(">II", 0, 1) + struct.pack(">I", 20))), "no sample sizes (stsz) or chunk"),
    (box("stbl", STCO), "no sample sizes (stsz) or chunk"),
    (box("stbl", full_box("stsz", struct.pack(">II", 0, 1) + struct.pack(">I", 20))
         + full_box("stco", struct.pack(">I", 0))), "samples but no chunks"),
], ids=["stz2 16-bit over", "stz2 8-bit over", "stz2 4-bit over", "uniform over", "stz2 5-bit", "stz2 5-bit, room enough", "stz2 8-bit short",
        "stz2 4-bit short", "stz2 16-bit short", "stz2 short", "no stco", "no stsz", "no chunks"])
def test_sample_tables_that_do_not_fit_are_corrupt(tmp_path, stbl, reason):
    with pytest.raises(CrawlError) as caught:
        verify_mp4(write(tmp_path, mp4(FTYP, moov_with(stbl), MDAT_25)))
    assert caught.value.error_class is ErrorClass.CORRUPT_MEDIA and reason in caught.value.message


def test_index_boxes_may_end_with_an_empty_box_or_a_few_bytes_of_padding(tmp_path):
    verify_mp4(write(tmp_path, mp4(FTYP, moov_with(sample_table(), box("udta")), MDAT)))
    verify_mp4(write(tmp_path, mp4(FTYP, moov_with(sample_table(), b"\x00" * 4), MDAT)))


def test_an_index_box_smaller_than_its_header_is_corrupt(tmp_path):
    with pytest.raises(CrawlError) as caught:
        verify_mp4(write(tmp_path, mp4(FTYP, moov_with(sample_table(), struct.pack(">I4s", 5, b"udta")), MDAT)))
    assert "impossible size 5" in caught.value.message


@pytest.mark.parametrize(("layout", "count"), [
    (mp4(FTYP, FRAGMENTED_MOOV, MOOF, MDAT, MOOF), 1),
    (mp4(FTYP, FRAGMENTED_MOOV, MOOF, MOOF, MDAT, MOOF), 2),
])
def test_every_fragment_without_media_data_is_counted(tmp_path, layout, count):
    with pytest.raises(CrawlError) as caught:
        verify_mp4(write(tmp_path, layout))
    assert f"{count} fragment(s) have no mdat after them" in caught.value.message



@pytest.mark.parametrize(("stbl", "reason"), [
    (box("stbl", full_box("stsz", struct.pack(">I", 1)) + STCO), "stsz is too short"),
    (box("stbl", full_box("stz2", struct.pack(">I", 8)) + STCO), "stz2 is too short"),
    (box("stbl", sample_table()[8:-20] + full_box("stco", b"")), "stco is too short"),
    (box("stbl", sample_table()[8:-20] + full_box("co64", struct.pack(">I", 1) + b"\x00" * 4)), "more chunks"),
], ids=["stsz", "stz2", "stco", "co64"])
def test_index_boxes_too_short_for_their_fields_are_corrupt(tmp_path, stbl, reason):
    with pytest.raises(CrawlError) as caught:
        verify_mp4(write(tmp_path, mp4(FTYP, moov_with(stbl), MDAT)))
    assert reason in caught.value.message


def test_an_index_box_running_past_its_parent_is_corrupt(tmp_path):
    """The moov is whole, but a child inside it claims more than the moov holds."""
    with pytest.raises(CrawlError) as caught:
        verify_mp4(write(tmp_path, mp4(FTYP, moov_with(sample_table(), struct.pack(">I4s", 400, b"udta")), MDAT)))
    assert "impossible size 400" in caught.value.message


CO64 = full_box("co64", struct.pack(">I", 1) + b"\x00\x00\x00\x00" + CHUNK_OFFSET_SENTINEL)


@pytest.mark.parametrize("layout", [
    mp4(FTYP, moov_with(sample_table(), box("udta", b"x" * 12, large=True)), MDAT),  # a 64-bit size inside the moov
    mp4(FTYP, box("moov", box("mvhd", b"\x00" * 100) + box("trak", box("mdia", box("minf", sample_table())), large=True)),
        MDAT),  # a track read through its 64-bit header
    mp4(FTYP, moov_with(sample_table(), struct.pack(">I4s", 0, b"udta") + b"x" * 12), MDAT),  # size 0: to its end
    mp4(FTYP, moov_with(box("stbl", full_box("stsz", struct.pack(">II", 0, 1) + struct.pack(">I", 20)) + CO64)), MDAT),
    mp4(FTYP, box("pad ", b"\x00" * 4), box("abc~"), MOOV, MDAT),  # box types span the printable range
], ids=["large index box", "large trak", "size-0 index box", "co64", "printable types"])
def test_index_boxes_in_every_legal_encoding_pass(tmp_path, layout):
    verify_mp4(write(tmp_path, layout))


@pytest.mark.parametrize(("layout", "reason"), [
    (mp4(FTYP, moov_with(sample_table(), struct.pack(">I4sI", 1, b"udta", 0)), MDAT), "inside a 64-bit header"),
    (mp4(FTYP, moov_with(sample_table(), struct.pack(">I4sQ", 1, b"udta", 400)), MDAT), "impossible size 400"),
    (mp4(FTYP, box("fre\x7f"), MOOV, MDAT), "garbage"),
    (mp4(FTYP, box("moov", box("trak", box("mdia", box("minf", sample_table(
        chunk_offset=struct.pack(">I", 10_000)))))), MDAT), "outside every mdat"),
    (mp4(FTYP, moov_with(box("stbl", full_box("stsz", struct.pack(">II", 0, 3) + struct.pack(">I", 20)) + STCO)),
         MDAT), "stsz lists more samples"),
    (mp4(FTYP, moov_with(box("stbl", sample_table()[8:-20] + full_box("stco", struct.pack(">I", 2) + CHUNK_OFFSET_SENTINEL))),
         MDAT), "stco lists more chunks"),
    (mp4(STYP, box("moof", box("traf", box("trun", b"\x00" * 4))), MDAT), "trun is too short"),
], ids=["cut large header", "large past its parent", "DEL in a type", "chunk far past", "stsz short", "stco short",
        "trun short"])
def test_index_boxes_that_lie_about_their_length_are_corrupt(tmp_path, layout, reason):
    with pytest.raises(CrawlError) as caught:
        verify_mp4(write(tmp_path, layout))
    assert caught.value.error_class is ErrorClass.CORRUPT_MEDIA and reason in caught.value.message


def test_a_chunk_just_past_the_media_data_is_outside_it(tmp_path):
    """The chunk offset one byte past the mdat's last byte: not inside it."""
    def layout_with(offset: int) -> bytes:
        chunk = struct.pack(">I", offset)
        return mp4(FTYP, box("moov", box("trak", box("mdia", box("minf", sample_table(chunk_offset=chunk))))), MDAT)

    end = len(layout_with(0))  # the mdat is the last box: its last byte is the file's
    layout = layout_with(end)
    assert len(layout) == end
    with pytest.raises(CrawlError) as caught:
        verify_mp4(write(tmp_path, layout))
    assert "outside every mdat" in caught.value.message

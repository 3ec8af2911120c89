"""WebM element walking on crafted files: every size encoding a muxer writes (1 to 8 byte sizes,
unknown sizes of a live Segment or Cluster) passes, and cut, forged or flooded files are
corrupt_media (what a real ffmpeg WebM looks like is test_hostile_media's)."""
from __future__ import annotations

import pytest

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.verify.webm import verify_webm

EBML, SEGMENT, TRACKS, CLUSTER, VOID = b"\x1a\x45\xdf\xa3", b"\x18\x53\x80\x67", b"\x16\x54\xae\x6b", b"\x1f\x43\xb6\x75", b"\xec"
UNKNOWN_1, UNKNOWN_8 = b"\xff", b"\x01\xff\xff\xff\xff\xff\xff\xff"  # "size unknown" in one and in eight bytes


def size(n: int, length: int = 1) -> bytes:
    """n as an EBML size of `length` bytes (the length marker bit, then the value)."""
    return ((1 << (7 * length)) | n).to_bytes(length, "big")


def element(element_id: bytes, payload: bytes, length: int = 1) -> bytes:
    return element_id + size(len(payload), length) + payload


HEADER = element(EBML, element(b"\x42\x82", b"webm"))
TRACKS_ELEMENT = element(TRACKS, element(b"\xae", b"\xd7\x81\x01"))
CLUSTER_ELEMENT = element(CLUSTER, b"\xe7\x81\x00\xa3\x81\x00")


def check(tmp_path, data: bytes) -> None:
    path = tmp_path / "video.webm"
    path.write_bytes(data)
    verify_webm(path)


@pytest.mark.parametrize("data", [
    HEADER + element(SEGMENT, TRACKS_ELEMENT + CLUSTER_ELEMENT),
    *[HEADER + element(SEGMENT, TRACKS_ELEMENT + CLUSTER_ELEMENT, length) for length in (2, 4, 8)],
    HEADER + SEGMENT + UNKNOWN_8 + TRACKS_ELEMENT + CLUSTER_ELEMENT,  # a live Segment: to the end of the file
    HEADER + SEGMENT + UNKNOWN_1 + TRACKS_ELEMENT + CLUSTER + UNKNOWN_1 + b"\xe7\x81\x00",  # and a live Cluster
    HEADER + element(SEGMENT, TRACKS_ELEMENT + element(VOID, b"") + CLUSTER_ELEMENT),  # an empty Void is fine
    HEADER + element(SEGMENT, TRACKS_ELEMENT + CLUSTER_ELEMENT + element(VOID, b"")),  # even as the last element
], ids=["1-byte sizes", "2-byte", "4-byte", "8-byte", "unknown-size Segment", "unknown-size Cluster", "empty Void",
        "empty Void last"])
def test_every_size_encoding_of_a_whole_file_passes(tmp_path, data):
    check(tmp_path, data)


@pytest.mark.parametrize(("data", "reason"), [
    (b"", "ends inside"),
    (EBML[:2], "ends inside"),
    (EBML + b"\x42", "ends inside"),  # a two-byte size with one byte
    (b"\x00" + HEADER, "invalid element header"),  # no length marker in the first byte
    (b"\x08\x00\x00\x00\x00" + size(0), "invalid element header"),  # a five-byte id
    (EBML + UNKNOWN_1 + element(SEGMENT, TRACKS_ELEMENT + CLUSTER_ELEMENT), "EBML header"),
    (element(SEGMENT, TRACKS_ELEMENT + CLUSTER_ELEMENT), "EBML header"),
    (HEADER + element(TRACKS, b"") + element(SEGMENT, TRACKS_ELEMENT + CLUSTER_ELEMENT), "no Segment"),
    (HEADER + SEGMENT + size(40) + TRACKS_ELEMENT + CLUSTER_ELEMENT, "cut body"),  # the Segment needs more
    (HEADER + SEGMENT + UNKNOWN_8 + TRACKS_ELEMENT + CLUSTER + size(40) + b"\xe7\x81\x00", "cut body"),
    (HEADER + element(SEGMENT, TRACKS_ELEMENT + element(CLUSTER, b"")), "empty Cluster"),
    (HEADER + element(SEGMENT, CLUSTER_ELEMENT), "no Tracks or no Cluster"),
    (HEADER + element(SEGMENT, TRACKS_ELEMENT), "no Tracks or no Cluster"),
    (HEADER + SEGMENT + UNKNOWN_1 + CLUSTER + UNKNOWN_1 + b"\xe7\x81\x00", "no Tracks or no Cluster"),
    (HEADER + SEGMENT + UNKNOWN_1 + TRACKS + UNKNOWN_1 + CLUSTER_ELEMENT, "no Tracks or no Cluster"),
], ids=["empty", "cut id", "cut size", "no marker", "five-byte id", "unknown-size header", "no header",
        "no Segment", "Segment past the end", "Cluster past the end", "empty Cluster",
        "no Tracks", "no Cluster", "live, no Tracks", "live Tracks swallow the Cluster"])
def test_cut_forged_and_empty_files_are_corrupt(tmp_path, data, reason):
    with pytest.raises(CrawlError) as caught:
        check(tmp_path, data)
    assert caught.value.error_class is ErrorClass.CORRUPT_MEDIA and reason in caught.value.message


def test_an_element_flood_is_refused_at_a_bound(tmp_path, monkeypatch):
    """The walk counts elements and stops past the bound (set small here: its logic, not its value)."""
    import media_crawler.verify.webm as webm_module

    monkeypatch.setattr(webm_module, "MAX_ELEMENTS", 50)
    voids = element(VOID, b"") * (50 - 2)
    check(tmp_path, HEADER + SEGMENT + UNKNOWN_8 + TRACKS_ELEMENT + voids + CLUSTER_ELEMENT)  # exactly the bound
    with pytest.raises(CrawlError) as caught:  # one more
        check(tmp_path, HEADER + SEGMENT + UNKNOWN_8 + TRACKS_ELEMENT + voids + element(VOID, b"") + CLUSTER_ELEMENT)
    assert "more than 50 elements" in caught.value.message

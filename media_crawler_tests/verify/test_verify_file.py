"""verify_file: size and hash gates, signature versus the record's kind, and dispatch to the image and MP4 checks."""
from __future__ import annotations

import hashlib

import pytest

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.verify import VerifyResult, verify_file
from media_crawler.verify.verify import Written
from media_crawler_sim.hostile.builders import FTYP, MDAT, MOOV, image_bytes, mp4, webm


def write(tmp_path, data: bytes):
    path = tmp_path / "item.part"
    path.write_bytes(data)
    return path


def error_class(path, **options) -> ErrorClass:
    with pytest.raises(CrawlError) as caught:
        verify_file(path, **options)
    return caught.value.error_class


def test_a_real_jpeg_passes_with_size_and_hash(tmp_path):
    data = image_bytes("JPEG", size=(320, 200))
    digest = hashlib.sha256(data).hexdigest()
    result = verify_file(write(tmp_path, data), kind="image", expected_size=len(data), expected_sha256=digest)
    assert result == VerifyResult("image/jpeg", 320, 200)


def test_video_and_audio_tracks_pass(tmp_path):
    path = write(tmp_path, mp4(FTYP, MOOV, MDAT))
    assert verify_file(path, kind="video") == VerifyResult("video/mp4")
    assert verify_file(path, kind="audio") == VerifyResult("audio/mp4")
    webm_path = write(tmp_path, webm())
    assert verify_file(webm_path, kind="video").media_type == "video/webm"


@pytest.mark.parametrize(("data", "reason"), [
    (b"\x1a\x45\xdf\xa3" + b"\x00" * 60, "invalid element header"),  # the signature and nothing of a file
    (webm()[:-2], "cut body"),
    (webm(tracks=False), "no Tracks"),
    (webm(cluster=None), "no Cluster"),
    (webm(cluster=b""), "empty Cluster"),
])
def test_broken_webm_is_corrupt(tmp_path, data, reason):
    with pytest.raises(CrawlError) as caught:
        verify_file(write(tmp_path, data), kind="video")
    assert caught.value.error_class is ErrorClass.CORRUPT_MEDIA and reason in caught.value.message


def test_size_and_hash_gates(tmp_path):
    data = image_bytes("PNG")
    path = write(tmp_path, data)
    assert error_class(path, kind="image", expected_size=len(data) + 1) is ErrorClass.TRUNCATED_BODY
    assert error_class(path, kind="image", expected_size=len(data) - 1) is ErrorClass.HASH_MISMATCH
    assert error_class(path, kind="image", max_bytes=len(data) - 1) is ErrorClass.TOO_LARGE
    assert error_class(path, kind="image", expected_sha256="0" * 64) is ErrorClass.HASH_MISMATCH
    # The downloader's inline hash is trusted: no second read of the file.
    assert error_class(path, kind="image", expected_sha256="a" * 64, written=Written(sha256="b" * 64)) is ErrorClass.HASH_MISMATCH
    assert error_class(write(tmp_path, b""), kind="image") is ErrorClass.TRUNCATED_BODY


@pytest.mark.parametrize(
    "data, kind",
    [
        (b"<!DOCTYPE html><html><body>login required</body></html>", "image"),
        (b'{"code": 403}', "video"),
        (b"\x00\x01\x02\x03 not any known format at all", "image"),
        (image_bytes("JPEG"), "video"),  # a thumbnail where the video should be
        (mp4(FTYP, MOOV, MDAT), "image"),
    ],
)
def test_wrong_signatures_are_bad_signature(tmp_path, data, kind):
    assert error_class(write(tmp_path, data), kind=kind) is ErrorClass.BAD_SIGNATURE


def test_format_checks_decide_corrupt_media(tmp_path):
    jpeg = image_bytes("JPEG", size=(640, 480))
    assert error_class(write(tmp_path, jpeg[: len(jpeg) // 2]), kind="image") is ErrorClass.CORRUPT_MEDIA
    assert error_class(write(tmp_path, mp4(FTYP, MOOV)), kind="video") is ErrorClass.CORRUPT_MEDIA


def test_unknown_kinds_are_a_programming_error(tmp_path):
    with pytest.raises(ValueError):
        verify_file(write(tmp_path, b"x"), kind="document")


def test_the_byte_limit_admits_a_file_of_exactly_its_size(tmp_path):
    data = image_bytes("PNG")
    path = tmp_path / "img.png"
    path.write_bytes(data)
    assert verify_file(path, kind="image", max_bytes=len(data)).media_type == "image/png"
    with pytest.raises(CrawlError) as caught:
        verify_file(path, kind="image", max_bytes=len(data) - 1)
    assert caught.value.error_class is ErrorClass.TOO_LARGE


def test_an_announced_file_beyond_the_decode_bound_stays_too_large(tmp_path):
    """Only a decode failure of the announced bytes is unsupported_media; a bound is still a bound."""
    import hashlib
    import struct

    frame = b"\x2c" + struct.pack("<HHHH", 0, 0, 1, 1) + b"\x00" + b"\x02\x02\x44\x01\x00"
    gif = b"GIF89a" + struct.pack("<HH", 4000, 4000) + b"\x80\x00\x00" + b"\x00\x00\x00\xff\xff\xff" + frame * 26 + b"\x3b"
    path = tmp_path / "anim.gif"
    path.write_bytes(gif)
    with pytest.raises(CrawlError) as caught:
        verify_file(path, kind="image", expected_sha256=hashlib.sha256(gif).hexdigest())
    assert caught.value.error_class is ErrorClass.TOO_LARGE

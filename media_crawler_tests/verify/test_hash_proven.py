"""verify_file when the bytes match the sha256 their source announced: the checks that only
find transit damage (pixel decode, missing moov) are skipped, every other check still runs."""
from __future__ import annotations

import hashlib

import pytest

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.verify import VerifyResult, verify_file
from media_crawler.verify import images as images_module
from media_crawler_tests.verify.media import FTYP, MDAT, image_bytes, mp4, png_bomb


def write(tmp_path, data: bytes, name: str = "item.part"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def error_class(path, **options) -> ErrorClass:
    with pytest.raises(CrawlError) as caught:
        verify_file(path, **options)
    return caught.value.error_class


def test_an_mp4_without_moov_passes_only_when_its_announced_hash_matches(tmp_path):
    data = mp4(FTYP, MDAT)  # what a progressive MP4 cut before its index looks like
    path = write(tmp_path, data)
    assert error_class(path, kind="video") is ErrorClass.CORRUPT_MEDIA
    assert verify_file(path, kind="video", expected_sha256=sha(data)) == VerifyResult("video/mp4")
    assert verify_file(path, kind="video", expected_sha256=sha(data), actual_sha256=sha(data)) == VerifyResult("video/mp4")
    # The box walk still runs: boxes must add up to the file.
    cut = mp4(FTYP, MDAT)[:-3]
    assert error_class(write(tmp_path, cut, "cut.part"), kind="video", expected_sha256=sha(cut)) is ErrorClass.CORRUPT_MEDIA


def test_a_hash_proven_image_is_not_decoded_but_still_header_checked(tmp_path, monkeypatch):
    data = image_bytes("JPEG", size=(320, 200))
    path = write(tmp_path, data)
    decoded = []
    real = images_module._decode_jpeg_draft
    monkeypatch.setattr(images_module, "_decode_jpeg_draft", lambda *a: decoded.append(a) or real(*a))
    assert verify_file(path, kind="image", expected_sha256=sha(data)) == VerifyResult("image/jpeg", 320, 200)
    assert decoded == []
    assert verify_file(path, kind="image") == VerifyResult("image/jpeg", 320, 200)
    assert len(decoded) == 1  # without an announced hash, the decode is the only proof of a whole body


def test_a_matching_hash_never_excuses_a_bomb_a_document_or_a_foreign_format(tmp_path):
    bomb = png_bomb()
    assert error_class(write(tmp_path, bomb, "bomb.part"), kind="image", expected_sha256=sha(bomb)) is ErrorClass.CORRUPT_MEDIA
    html = b"<!DOCTYPE html><html><body>login required</body></html>"
    assert error_class(write(tmp_path, html, "page.part"), kind="image", expected_sha256=sha(html)) is ErrorClass.BAD_SIGNATURE
    jpeg = image_bytes("JPEG")
    assert error_class(write(tmp_path, jpeg, "thumb.part"), kind="video", expected_sha256=sha(jpeg)) is ErrorClass.BAD_SIGNATURE


def test_bytes_without_a_known_signature_pass_only_when_hash_proven(tmp_path):
    data = bytes(range(256)) * 40  # a list's .bin: no magic bytes, not a document
    path = write(tmp_path, data)
    assert error_class(path, kind="image") is ErrorClass.BAD_SIGNATURE
    assert error_class(path, kind="image", expected_sha256="0" * 64) is ErrorClass.HASH_MISMATCH
    assert verify_file(path, kind="image", expected_sha256=sha(data)) == VerifyResult("application/octet-stream")

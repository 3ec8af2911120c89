"""verify_file when the bytes match the sha256 their source announced: a hash proves the bytes
are the announced ones, not that they are media, so every decode still runs; bytes of no
media format are unsupported_media unless the platform allows unknown formats."""
from __future__ import annotations

import hashlib

import pytest

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.verify import VerifyResult, verify_file
from media_crawler.verify import images as images_module
from media_crawler_sim.hostile.builders import FTYP, MDAT, image_bytes, mp4, png_bomb


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


def test_an_mp4_without_moov_is_refused_even_when_its_announced_hash_matches(tmp_path):
    data = mp4(FTYP, MDAT)
    path = write(tmp_path, data)
    assert error_class(path, kind="video") is ErrorClass.CORRUPT_MEDIA  # retried: a download may have cut it
    # The announced file itself does not decode: refused for good, never downloaded again.
    assert error_class(path, kind="video", expected_sha256=sha(data)) is ErrorClass.UNSUPPORTED_MEDIA


def test_a_hash_proven_image_is_decoded_all_the_same(tmp_path, monkeypatch):
    data = image_bytes("JPEG", size=(320, 200))
    path = write(tmp_path, data)
    decoded = []
    real = images_module._decode_frames
    monkeypatch.setattr(images_module, "_decode_frames", lambda *a: decoded.append(a[1]) or real(*a))
    assert verify_file(path, kind="image", expected_sha256=sha(data)) == VerifyResult("image/jpeg", 320, 200)
    assert decoded == ["JPEG"]
    cut = data[: len(data) // 2]
    assert error_class(write(tmp_path, cut, "cut.part"), kind="image") is ErrorClass.CORRUPT_MEDIA
    assert error_class(write(tmp_path, cut, "cut.part"), kind="image", expected_sha256=sha(cut)) is ErrorClass.UNSUPPORTED_MEDIA


def test_a_matching_hash_never_excuses_a_bomb_a_document_or_a_foreign_format(tmp_path):
    bomb = png_bomb()
    assert error_class(write(tmp_path, bomb, "bomb.part"), kind="image", expected_sha256=sha(bomb)) is ErrorClass.UNSUPPORTED_MEDIA
    html = b"<!DOCTYPE html><html><body>login required</body></html>"
    assert error_class(write(tmp_path, html, "page.part"), kind="image", expected_sha256=sha(html)) is ErrorClass.UNSUPPORTED_MEDIA
    jpeg = image_bytes("JPEG")
    assert error_class(write(tmp_path, jpeg, "thumb.part"), kind="video", expected_sha256=sha(jpeg)) is ErrorClass.BAD_SIGNATURE


@pytest.mark.parametrize("data", [
    b"<title>Not an image</title>", b"<div class='x'>", b"<svg onload=alert(1)>", b"<?php system($_GET[c]); ?>",
    b"\x7fELF\x02\x01\x01" + b"\x00" * 60, b"MZ\x90\x00" + b"\x00" * 60, b"%PDF-1.7\n",
])
def test_documents_and_executables_are_never_stored_even_when_unknown_formats_are_allowed(tmp_path, data):
    path = write(tmp_path, data)
    assert error_class(path, kind="image", expected_sha256=sha(data), allow_unknown=True) is ErrorClass.UNSUPPORTED_MEDIA
    assert error_class(path, kind="image") is ErrorClass.BAD_SIGNATURE


def test_bytes_without_a_known_signature_are_unsupported_unless_the_platform_allows_them(tmp_path):
    data = bytes(range(256)) * 40  # a list's .bin: no magic bytes, not a document
    path = write(tmp_path, data)
    assert error_class(path, kind="image") is ErrorClass.BAD_SIGNATURE
    assert error_class(path, kind="image", expected_sha256="0" * 64) is ErrorClass.HASH_MISMATCH
    assert error_class(path, kind="image", expected_sha256=sha(data)) is ErrorClass.UNSUPPORTED_MEDIA
    assert verify_file(path, kind="image", expected_sha256=sha(data), allow_unknown=True) == VerifyResult(
        "application/octet-stream")

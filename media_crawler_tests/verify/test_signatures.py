"""Magic-byte sniffing: the media table, documents (HTML/JSON/XML) and the first-chunk check."""
from __future__ import annotations

import pytest

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.verify.signatures import check_media_head, describe_foreign, sniff, sniff_document
from media_crawler.verify.verify import verify_file
from media_crawler_sim.hostile.builders import FTYP, MDAT, STYP, box, image_bytes


@pytest.mark.parametrize(
    "head, media_type",
    [
        (image_bytes("JPEG"), "image/jpeg"),
        (image_bytes("PNG"), "image/png"),
        (image_bytes("GIF"), "image/gif"),
        (image_bytes("WEBP"), "image/webp"),
        (FTYP + MDAT, "video/mp4"),
        (STYP + box("sidx"), "video/mp4"),  # DASH media segment
        (box("sidx") + box("moof"), "video/mp4"),  # segment without styp
        (b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01webm", "video/webm"),
        (b"\x00\x01\x02\x03\x04\x05\x06\x07\x08", None),
        (b"", None),
    ],
)
def test_sniff_recognizes_the_media_table(head, media_type):
    assert sniff(head[:64]) == media_type


@pytest.mark.parametrize(
    "head, kind",
    [
        (b"<!DOCTYPE html><html>", "html"),
        (b"\xef\xbb\xbf\r\n  <HTML lang=zh>", "html"),
        (b'{"code":-404,"message":"not found"}', "json"),
        (b"  [1, 2]", "json"),
        (b"<?xml version='1.0'?><Error/>", "xml"),
        (b"\xff\xd8\xff\xe0", None),
    ],
)
def test_documents_are_recognized(head, kind):
    assert sniff_document(head) == kind


def test_check_media_head_rejects_documents_and_document_labels():
    with pytest.raises(CrawlError) as caught:
        check_media_head(b"<html><body>login</body></html>", "image/jpeg")
    assert caught.value.error_class is ErrorClass.BAD_SIGNATURE
    with pytest.raises(CrawlError):
        check_media_head(b"\x00\x00 not media", "application/json; charset=utf-8")


def test_check_media_head_trusts_bytes_over_labels():
    assert check_media_head(image_bytes("PNG")[:64], "text/html") == "image/png"
    assert check_media_head(b"\x00\x00\x00 unknown", "application/octet-stream") is None


@pytest.mark.parametrize(("head", "media_type"), [
    (b"RIFF\x00\x00\x00\x00WEBP", "image/webp"),  # the shortest head that proves each
    (b"\x00\x00\x00\x08ftyp", "video/mp4"),
    (b"RIFF\x24\x00\x00\x00WAVEfmt ", None),  # RIFF holds sound and video too: only a WEBP form is an image
    (b"RIFX\x00\x00\x00\x00WEBPVP8 ", None),
    (b"RIFF\x00\x00\x00\x00WEB", None),
    (b"\x00\x00\x00\x08fty", None),
])
def test_sniff_needs_the_whole_signature(head, media_type):
    assert sniff(head) == media_type


@pytest.mark.parametrize(("head", "what"), [
    (b"\x7fELF\x02\x01\x01", "an ELF executable"),
    (b"<!DOCTYPE html><html>", "HTML"),
    (b'{"error": "denied"}', "JSON"),
    (b"\xef\xbb\xbf  <div class='login'>", "markup (HTML or XML)"),  # a fragment with no doctype
    (b"\x00\x01\x02 unknown", None),
])
def test_foreign_files_are_named_and_unknown_bytes_are_not(head, what):
    assert describe_foreign(head) == what


def test_allow_unknown_stores_unknown_bytes_but_never_a_document_or_an_executable(tmp_path):
    unknown = tmp_path / "unknown"
    unknown.write_bytes(b"\x00\x01\x02 some codec we do not parse" * 10)
    assert verify_file(unknown, kind="video", allow_unknown=True).media_type == "application/octet-stream"
    for name, data in (("page", b"<div>please log in</div>" * 10), ("elf", b"\x7fELF" + b"\x00" * 100)):
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(CrawlError) as caught:
            verify_file(path, kind="video", allow_unknown=True)
        assert caught.value.error_class is ErrorClass.BAD_SIGNATURE


def test_an_unknown_head_without_a_label_is_left_to_verification():
    assert check_media_head(b"\x00\x01\x02 unknown", None) is None

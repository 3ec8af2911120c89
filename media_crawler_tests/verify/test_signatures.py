"""Magic-byte sniffing: the media table, documents (HTML/JSON/XML) and the first-chunk check."""
from __future__ import annotations

import pytest

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.verify.signatures import check_media_head, sniff, sniff_document
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

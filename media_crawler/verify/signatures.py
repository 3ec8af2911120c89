"""Magic bytes: what a body is, judged by its first bytes rather than its headers.

CDNs and login walls answer a media URL with an HTML page, a JSON error or an
XML error document (S3-style) and a 200 status; curl and friends store those
as the file. `check_media_head` turns that into bad_signature on the first
chunk, before the rest of the body is written.
"""
from __future__ import annotations

from media_crawler.errors import CrawlError, ErrorClass

HEAD_BYTES = 64  # enough for every signature below and for the document test

# ISO-BMFF (MP4, DASH .m4s) starts with a box header: 4 size bytes, then the type.
# A full file opens with ftyp; a DASH media segment with styp, or directly with
# sidx/moof when the server strips the segment type box.
ISO_BMFF_FIRST_BOXES = (b"ftyp", b"styp", b"sidx", b"moof")

DOCUMENT_CONTENT_TYPES = ("text/html", "application/xhtml", "application/json", "text/json", "text/xml", "application/xml")

_DOCUMENT_PREFIXES = (
    (b"<!doctype html", "html"),
    (b"<html", "html"),
    (b"<head", "html"),
    (b"<body", "html"),
    (b"<script", "html"),
    (b"<?xml", "xml"),
    (b"<!--", "html"),
    (b"{", "json"),
    (b"[", "json"),
)


def sniff(head: bytes) -> str | None:
    """The media type the leading bytes prove, or None."""
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(head) >= 12 and head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    if len(head) >= 8 and head[4:8] in ISO_BMFF_FIRST_BOXES:
        return "video/mp4"
    if head.startswith(b"\x1a\x45\xdf\xa3"):  # EBML header: Matroska / WebM
        return "video/webm"
    return None


def sniff_document(head: bytes) -> str | None:
    """'html', 'json' or 'xml' when the bytes are a text document, else None."""
    text = head.lstrip(b"\xef\xbb\xbf").lstrip().lower()  # UTF-8 BOM, then whitespace
    for prefix, kind in _DOCUMENT_PREFIXES:
        if text.startswith(prefix):
            return kind
    return None


# Formats that are never media, whatever a feed claims: what they are, for the message.
_FOREIGN_PREFIXES = (
    (b"\x7fELF", "an ELF executable"), (b"MZ", "a Windows executable"), (b"#!", "a script"),
    (b"%PDF", "a PDF document"), (b"PK\x03\x04", "a ZIP archive"), (b"\x1f\x8b", "gzip data"),
    (b"<?php", "PHP source"), (b"<svg", "an SVG document"),
)


def describe_foreign(head: bytes) -> str | None:
    """What a non-media file is ('HTML', 'an ELF executable', markup...), or None if nothing is recognized.

    Any text starting with `<` is markup (HTML fragments such as `<title>` or `<div>`
    have no doctype), and SVG may carry script: none of it is stored as media."""
    for prefix, what in _FOREIGN_PREFIXES:
        if head.startswith(prefix):
            return what
    document = sniff_document(head)
    if document is not None:
        return document.upper()
    if head.lstrip(b"\xef\xbb\xbf").lstrip().startswith(b"<"):
        return "markup (HTML or XML)"
    return None


def check_media_head(head: bytes, content_type: str | None = None) -> str | None:
    """Raise bad_signature when the first bytes are a document, not media.

    Returns the sniffed media type (None when unknown: verification decides
    later). Bytes win over the Content-Type header: CDNs mislabel real media
    often, but a known media signature under a text/html label is still media.
    """
    media_type = sniff(head)
    if media_type is not None:
        return media_type
    document = sniff_document(head)
    if document is not None:
        raise CrawlError(ErrorClass.BAD_SIGNATURE, f"server sent {document.upper()} where media was expected")
    declared = (content_type or "").split(";")[0].strip().lower()
    if declared.startswith(DOCUMENT_CONTENT_TYPES):
        raise CrawlError(ErrorClass.BAD_SIGNATURE, f"server sent {declared} without a media signature")
    return None

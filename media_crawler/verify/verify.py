"""verify_file: the one gate between a downloaded .part and the blob store.

Cheap checks run first and decide most failures without parsing anything:
size against the announced size, the hash against the announced hash, then the
magic bytes against the record's kind; only then the format-specific walk
(Pillow for images, the box walk for MP4).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.store.cas import file_sha256
from media_crawler.verify.images import DEFAULT_MAX_PIXELS, verify_image
from media_crawler.verify.mp4 import verify_mp4
from media_crawler.verify.signatures import HEAD_BYTES, sniff, sniff_document

# Which sniffed types each record kind accepts. Audio tracks (DASH audio,
# m4a) are ISO-BMFF or WebM too: the signature cannot tell audio from video.
ACCEPTED_TYPES = {
    "image": ("image/jpeg", "image/png", "image/gif", "image/webp"),
    "video": ("video/mp4", "video/webm"),
    "audio": ("video/mp4", "video/webm"),
}


@dataclass(frozen=True)
class VerifyResult:
    media_type: str
    width: int | None = None
    height: int | None = None


def verify_file(
    path: str | os.PathLike,
    *,
    kind: str,
    expected_size: int | None = None,
    expected_sha256: str | None = None,
    actual_sha256: str | None = None,
    max_bytes: int | None = None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> VerifyResult:
    """Raise CrawlError unless `path` holds whole, genuine media of `kind`.

    actual_sha256: the hash the downloader computed while writing (saves a
    second read of the file); computed here when absent and needed.
    Classes: too_large (over max_bytes), truncated_body (shorter than
    announced), hash_mismatch (longer than announced, or another hash),
    bad_signature (a document or a foreign format), corrupt_media (the format
    check failed).
    """
    if kind not in ACCEPTED_TYPES:
        raise ValueError(f"unknown media kind {kind!r}; expected one of {', '.join(ACCEPTED_TYPES)}")
    path = Path(path)
    # One open for the size, the hash-proven shortcut, the signature and the
    # image header: at thousands of small files each extra open is several
    # system calls per item.
    with open(path, "rb") as handle:  # buffered: Pillow reads the header a few bytes at a time
        size = os.fstat(handle.fileno()).st_size
        _check_size(size, expected_size, max_bytes)
        # Bytes that hash to the sha256 their source announced are exactly the
        # published file: nothing was cut, spliced or swapped on the way. The
        # checks that exist only to find such damage (a pixel decode, a missing
        # moov, an unknown signature) are then skipped; the document (HTML/JSON),
        # foreign-format, dimension (bomb) and box-layout checks always run.
        hash_proven = False
        if expected_sha256:
            digest = actual_sha256 or file_sha256(path)
            if digest.lower() != expected_sha256.lower():
                raise CrawlError(ErrorClass.HASH_MISMATCH, f"sha256 {digest[:12]}… differs from the announced {expected_sha256[:12]}…")
            hash_proven = True

        head = handle.read(HEAD_BYTES)
        if hash_proven and sniff(head) is None and sniff_document(head) is None:
            # No signature we know, but exactly the bytes the source announced (a
            # list's .bin, a format without magic bytes): nothing is left to check.
            return VerifyResult("application/octet-stream")
        media_type = _sniff_for_kind(head, kind)

        if media_type.startswith("image/"):
            handle.seek(0)
            info = verify_image(path, max_pixels=max_pixels, decode=not hash_proven, opened=handle)
            return VerifyResult(info.media_type, info.width, info.height)
    if media_type == "video/mp4":
        verify_mp4(path, require_movie=not hash_proven)
        return VerifyResult("audio/mp4" if kind == "audio" else "video/mp4")
    # WebM: the EBML signature is all we check; no Matroska walker yet.
    return VerifyResult("audio/webm" if kind == "audio" else "video/webm")


def _check_size(size: int, expected_size: int | None, max_bytes: int | None) -> None:
    if max_bytes is not None and size > max_bytes:
        raise CrawlError(ErrorClass.TOO_LARGE, f"{size} bytes is above the {max_bytes} byte limit")
    if size == 0:
        raise CrawlError(ErrorClass.TRUNCATED_BODY, "empty body")
    if expected_size is None:
        return
    if size < expected_size:
        raise CrawlError(ErrorClass.TRUNCATED_BODY, f"{size} bytes of the announced {expected_size}")
    if size > expected_size:
        # More bytes than announced is not a cut: it is other content.
        raise CrawlError(ErrorClass.HASH_MISMATCH, f"{size} bytes, the source announced {expected_size}")


def _sniff_for_kind(head: bytes, kind: str) -> str:
    media_type = sniff(head)
    if media_type is None:
        document = sniff_document(head)
        if document:
            raise CrawlError(ErrorClass.BAD_SIGNATURE, f"file is {document.upper()}, not {kind}")
        raise CrawlError(ErrorClass.BAD_SIGNATURE, f"no known {kind} signature in the first bytes")
    if media_type not in ACCEPTED_TYPES[kind]:
        raise CrawlError(ErrorClass.BAD_SIGNATURE, f"file is {media_type}, expected {kind}")
    return media_type

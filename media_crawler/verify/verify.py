"""verify_file: the one gate between a downloaded .part and the blob store.

Cheap checks run first and decide most failures without parsing anything:
size against the announced size, the hash against the announced hash, then the
magic bytes against the record's kind; then, always, the format's own check:
every frame of an image decoded (verify/images.py), an MP4's boxes, sample
table and media data (verify/mp4.py), a WebM's elements (verify/webm.py).
"""
from __future__ import annotations

import io
import os
import struct
from pathlib import Path

from media_crawler.models import item_record
from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.store.blob_store import stream_sha256
from media_crawler.verify.images import DEFAULT_MAX_PIXELS, verify_image
from media_crawler.verify.mp4 import verify_mp4
from media_crawler.verify.signatures import HEAD_BYTES, describe_foreign, sniff
from media_crawler.verify.webm import verify_webm

# Which sniffed types each record kind accepts. Audio tracks (DASH audio,
# m4a) are ISO-BMFF or WebM too: the signature cannot tell audio from video.
ACCEPTED_TYPES = {
    "image": ("image/jpeg", "image/png", "image/gif", "image/webp"),
    "video": ("video/mp4", "video/webm"),
    "audio": ("video/mp4", "video/webm"),
}


@item_record
class VerifyResult:
    media_type: str
    width: int | None = None
    height: int | None = None


@item_record
class Written:
    """What the writer of a file knows of it a moment after writing: the sha256 it computed
    while streaming, and for a small file the bytes it wrote, hashed and fsynced
    (fetcher.py `DownloadResult.body`)."""

    sha256: str | None = None
    body: bytes | None = None


def verify_file(
    path: str | os.PathLike,
    *,
    kind: str,
    expected_size: int | None = None,
    expected_sha256: str | None = None,
    max_bytes: int | None = None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    allow_unknown: bool = False,
    written: Written | None = None,
) -> VerifyResult:
    """Raise CrawlError unless `path` holds whole, genuine media of `kind`.

    written: what the downloader knows of the file it just wrote (Written): its sha256
    (saves a second read; computed here when absent and needed) and, for a small file,
    its bytes (the checks and the decode read them instead of opening the file again).
    allow_unknown: store bytes of no known media format as octet-stream (the
    platform setting `allow_unknown_formats`); documents and executables are
    refused all the same.
    Classes: too_large (over max_bytes), truncated_body (shorter than
    announced), hash_mismatch (longer than announced, or another hash),
    bad_signature (a document or a foreign format, which a retry may fix),
    unsupported_media (the announced bytes themselves are no media we store, or do not
    decode: a download again would bring the same bytes),
    corrupt_media (the format check or a decoder failed).

    A matching sha256 proves the bytes are the ones announced, not that they are
    media: the decode runs either way.
    """
    if kind not in ACCEPTED_TYPES:
        raise ValueError(f"unknown media kind {kind!r}; expected one of {', '.join(ACCEPTED_TYPES)}")
    path = path if isinstance(path, Path) else Path(path)  # a Path given is not parsed again
    actual_sha256, body = (written.sha256, written.body) if written else (None, None)
    # One open for the size, the hash, the signature and the image's decode: at thousands
    # of small files each extra open is several system calls per item (and none with `body`).
    # Buffered: Pillow reads the header a few bytes at a time.
    with (io.BytesIO(body) if body is not None else open(path, "rb")) as handle:
        size = len(body) if body is not None else os.fstat(handle.fileno()).st_size
        _check_size(size, expected_size, max_bytes)
        hash_proven = False
        if expected_sha256:
            if not actual_sha256:
                digest = stream_sha256(handle)
                handle.seek(0)
            else:
                digest = actual_sha256
            if digest.lower() != expected_sha256.lower():
                raise CrawlError(ErrorClass.HASH_MISMATCH, f"sha256 {digest[:12]}… differs from the announced {expected_sha256[:12]}…")
            hash_proven = True

        head = handle.read(HEAD_BYTES)
        media_type = sniff(head)
        if media_type is None:
            if allow_unknown and describe_foreign(head) is None:
                return VerifyResult("application/octet-stream")
            raise _not_media(head, kind, hash_proven)
        if media_type not in ACCEPTED_TYPES[kind]:
            raise CrawlError(ErrorClass.BAD_SIGNATURE, f"file is {media_type}, expected {kind}")
        try:
            return _check_format(path, handle, media_type, kind, max_pixels)
        except CrawlError as error:
            if hash_proven and error.error_class is ErrorClass.CORRUPT_MEDIA:
                # The bytes are exactly the announced file, and that file does not decode:
                # downloading it again gives the same bytes, so it is not retried.
                raise CrawlError(ErrorClass.UNSUPPORTED_MEDIA, f"{error.message} (it is the announced file)") from None
            raise


def _check_format(path: Path, handle, media_type: str, kind: str, max_pixels: int) -> VerifyResult:
    """The format's own check: every image frame decoded, or the container walked."""
    if media_type.startswith("image/"):
        info = verify_image(path, max_pixels=max_pixels, opened=handle)  # from the handle's start
        return VerifyResult(info.media_type, info.width, info.height)
    try:
        (verify_mp4 if media_type == "video/mp4" else verify_webm)(path)
    except CrawlError:
        raise
    except (struct.error, ValueError, IndexError, OverflowError) as exc:  # a walker read past what it guarded
        raise CrawlError(ErrorClass.CORRUPT_MEDIA, f"{media_type} does not parse: {type(exc).__name__}") from None
    container = media_type.split("/", 1)[1]
    return VerifyResult(f"{'audio' if kind == 'audio' else 'video'}/{container}")


def _not_media(head: bytes, kind: str, hash_proven: bool) -> CrawlError:
    """No media signature. Bytes whose announced sha256 matched are exactly what the source
    publishes, so a retry cannot help: unsupported_media. Otherwise an error page or a
    wrong answer may be passing: bad_signature, retried from a clean .part."""
    what = describe_foreign(head)
    text = f"file is {what}, not {kind}" if what else f"no known {kind} signature in the first bytes"
    if hash_proven:
        return CrawlError(ErrorClass.UNSUPPORTED_MEDIA, f"{text} (it is the announced file)")
    return CrawlError(ErrorClass.BAD_SIGNATURE, text)


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

"""Image verification with Pillow: the header first, pixels only when it is safe.

Order matters: `Image.open` reads only the header, so the claimed dimensions
are checked before a single pixel is decoded. A decompression bomb (a few KB of
PNG claiming 100000x100000) is rejected there, never inflated.
Then: `verify()` (PNG checks every chunk CRC through IEND), a decode of a 1/8
scale draft for JPEG (libjpeg reads every scan, so a cut body fails, at 1/64 of
the memory), cheap structural checks for GIF/WebP, and a full decode of images
small enough that it costs little.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from PIL import Image, UnidentifiedImageError

from media_crawler.errors import CrawlError, ErrorClass

DEFAULT_MAX_PIXELS = 100_000_000
# Fully decode only below this (2 MP is ~8 MB as RGBA): catches corrupt
# compressed data in PNG/GIF/WebP, which verify() does not inflate.
FULL_DECODE_MAX_PIXELS = 2_000_000
# Only these parsers ever see downloaded bytes: Pillow's other plugins
# (EPS hands files to Ghostscript) have no business reading untrusted input.
PILLOW_FORMATS = ("JPEG", "PNG", "GIF", "WEBP")
MEDIA_TYPES = {"JPEG": "image/jpeg", "PNG": "image/png", "GIF": "image/gif", "WEBP": "image/webp"}

_DECODE_ERRORS = (OSError, SyntaxError, ValueError, EOFError, struct.error, Image.DecompressionBombError)


@dataclass(frozen=True)
class ImageInfo:
    media_type: str
    width: int
    height: int


def verify_image(path: str | os.PathLike, *, max_pixels: int = DEFAULT_MAX_PIXELS, decode: bool = True,
                 opened: BinaryIO | None = None) -> ImageInfo:
    """Raise CrawlError(corrupt_media) unless `path` is a whole, decodable image of sane size.

    decode=False skips the pixel decode (header, dimension guard, verify() and
    the trailer checks still run): for bytes already proven whole by the
    sha256 their source announced, where a decode could only find damage that
    the hash has ruled out (see verify_file).
    opened: `path` already open for reading at its start (the caller's handle
    is read for the header and left open).
    """
    path = Path(path)
    try:
        with Image.open(opened if opened is not None else path, formats=PILLOW_FORMATS) as image:
            image_format = image.format
            width, height = image.size
            _check_dimensions(width, height, max_pixels)
            image.verify()
        if not decode:
            pass
        elif image_format == "JPEG":
            _decode_jpeg_draft(path, width, height)
        elif width * height <= FULL_DECODE_MAX_PIXELS:
            with Image.open(path, formats=PILLOW_FORMATS) as image:
                image.load()
        if image_format == "GIF":
            _check_gif_trailer(path)
        elif image_format == "WEBP":
            _check_riff_length(path)
    except CrawlError:
        raise
    except Image.DecompressionBombError as exc:
        # Pillow's own guard (at 2x its MAX_IMAGE_PIXELS) fires inside open().
        raise CrawlError(ErrorClass.CORRUPT_MEDIA, f"image dimensions rejected as a decompression bomb: {exc}") from None
    except UnidentifiedImageError:
        raise CrawlError(ErrorClass.CORRUPT_MEDIA, "Pillow does not recognize the image") from None
    except _DECODE_ERRORS as exc:
        raise CrawlError(ErrorClass.CORRUPT_MEDIA, f"image does not decode: {exc}") from None
    return ImageInfo(MEDIA_TYPES[image_format], width, height)


def _check_dimensions(width: int, height: int, max_pixels: int) -> None:
    if width <= 0 or height <= 0:
        raise CrawlError(ErrorClass.CORRUPT_MEDIA, f"image claims impossible dimensions {width}x{height}")
    if width * height > max_pixels:
        raise CrawlError(
            ErrorClass.CORRUPT_MEDIA,
            f"image claims {width}x{height} pixels, above the {max_pixels} pixel limit (decompression bomb guard)",
        )


def _decode_jpeg_draft(path: Path, width: int, height: int) -> None:
    with Image.open(path, formats=("JPEG",)) as image:
        # draft() picks the smallest DCT scale >= the requested size: 1/8 here.
        image.draft("RGB", (max(1, width // 8), max(1, height // 8)))
        image.load()  # raises OSError "image file is truncated" on a cut body


def _check_gif_trailer(path: Path) -> None:
    """A GIF ends with the 0x3B trailer; a cut one does not (Pillow verify() skips GIF)."""
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) != b"\x3b":
            raise CrawlError(ErrorClass.CORRUPT_MEDIA, "GIF has no trailer byte: the file is cut")


def _check_riff_length(path: Path) -> None:
    """WebP's RIFF header states the file length; a cut file is shorter than that."""
    with open(path, "rb") as handle:
        header = handle.read(8)
    declared = struct.unpack("<I", header[4:8])[0] + 8
    actual = path.stat().st_size
    if actual < declared:
        raise CrawlError(ErrorClass.CORRUPT_MEDIA, f"WebP is {actual} bytes, its RIFF header says {declared}")

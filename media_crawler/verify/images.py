"""Image verification with Pillow: the header first, then every frame decoded.

Order matters: `Image.open` reads only the header, so the claimed dimensions
are checked before a single pixel is decoded. A decompression bomb (a few KB of
PNG claiming 100000x100000) is rejected there, never inflated.
Then every frame is decoded, whether or not the source announced a sha256 (a
hash proves the bytes are the announced ones, not that they are an image):
- JPEG (and MPO, a JPEG with more pictures): through `draft()` at 1/8 scale,
  which still entropy-decodes every byte of every scan, so a cut or garbage body
  fails, at 1/64 of the memory and a fraction of the CPU of a full decode;
- PNG, GIF, WebP: `load()` of every frame up to DECODE_BUDGET_PIXELS; a larger
  PNG has its IDAT stream inflated piecewise and its size checked instead (every
  compressed byte read, memory bounded); a larger GIF or WebP is refused as
  too_large, since decoding it would need that much memory.
PNG also passes `verify()` (every chunk CRC through IEND), GIF its trailer byte and
WebP its RIFF length. Any exception the decoders raise is corrupt_media.
"""
from __future__ import annotations

import os
import struct
import zlib
from typing import BinaryIO

from PIL import Image, UnidentifiedImageError
# Registered here, not left to Pillow's lazy init(): `Image.open(formats=...)` looks each
# format up in the registry, and an MPO needs its plugin loaded to be opened as one.
from PIL import GifImagePlugin, JpegImagePlugin, MpoImagePlugin, PngImagePlugin, WebPImagePlugin  # noqa: F401

from media_crawler.models import item_record
from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.scrub import excerpt

DEFAULT_MAX_PIXELS = 100_000_000
# One frame decoded in full only up to this many pixels (~64 MB as RGBA).
DECODE_BUDGET_PIXELS = 16_000_000
MAX_FRAMES = 2_000
# Over all frames of an animation: beyond this a decode is a CPU bomb.
MAX_DECODED_PIXELS = 400_000_000
# Only these parsers ever see downloaded bytes: Pillow's other plugins
# (EPS hands files to Ghostscript) have no business reading untrusted input.
# (An MPO, a JPEG holding more pictures, is opened by the JPEG plugin and reports "MPO".)
PILLOW_FORMATS = ("JPEG", "PNG", "GIF", "WEBP")
MEDIA_TYPES = {"JPEG": "image/jpeg", "MPO": "image/jpeg", "PNG": "image/png", "GIF": "image/gif",
               "WEBP": "image/webp"}
_PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # colour type -> samples per pixel


@item_record
class ImageInfo:
    media_type: str
    width: int
    height: int
    frames: int = 1


def corrupt(message: str) -> CrawlError:
    return CrawlError(ErrorClass.CORRUPT_MEDIA, message)


def verify_image(path: str | os.PathLike, *, max_pixels: int = DEFAULT_MAX_PIXELS,
                 opened: BinaryIO | None = None) -> ImageInfo:
    """Raise CrawlError unless `path` is a whole, fully decodable image of sane size.

    opened: `path` already open for reading (the caller's handle, left open). The file
    is opened once: the header, the decode and the format's own checks all read through
    one handle (at thousands of small files every open is several system calls).
    """
    if opened is not None:
        opened.seek(0)
        return _verify_image(opened, max_pixels)
    with open(path, "rb") as handle:
        return _verify_image(handle, max_pixels)


def _verify_image(handle: BinaryIO, max_pixels: int) -> ImageInfo:
    try:
        with Image.open(handle, formats=PILLOW_FORMATS) as image:  # a handle of ours: left open
            image_format = image.format
            width, height = image.size
            _check_dimensions(width, height, max_pixels)
            frames = _frame_count(image, width, height)
            if image_format == "PNG":
                image.verify()  # chunk CRCs; the image must be opened again to decode
            else:
                # Nothing decoded yet (the header and frame count only): decode this same image.
                _decode_frames(image, image_format, width, height, frames)
        if image_format == "PNG":
            _decode_png(handle, width, height)
        elif image_format == "GIF":
            _check_gif_trailer(handle)
        elif image_format == "WEBP":
            _check_riff_length(handle)
    except CrawlError:
        raise
    except Image.DecompressionBombError as exc:
        # Pillow's own guard (at 2x its MAX_IMAGE_PIXELS) fires inside open().
        raise corrupt(f"image dimensions rejected as a decompression bomb: {exc}") from None
    except UnidentifiedImageError:
        raise corrupt("Pillow does not recognize the image") from None
    except MemoryError:
        raise CrawlError(ErrorClass.TOO_LARGE, "image needs more memory to decode than this process has") from None
    except Exception as exc:  # noqa: BLE001 - any decoder failure (IndexError, KeyError, ...) is corrupt media
        raise corrupt(f"image does not decode: {type(exc).__name__}: {excerpt(str(exc), 200)}") from None
    return ImageInfo(MEDIA_TYPES[image_format], width, height, frames)


def _check_dimensions(width: int, height: int, max_pixels: int) -> None:
    if width <= 0 or height <= 0:
        raise corrupt(f"image claims impossible dimensions {width}x{height}")
    if width * height > max_pixels:
        raise corrupt(f"image claims {width}x{height} pixels, above the {max_pixels} pixel limit "
                      "(decompression bomb guard)")


def _frame_count(image: Image.Image, width: int, height: int) -> int:
    frames = int(getattr(image, "n_frames", 1) or 0)
    if frames < 1:
        raise corrupt(f"{image.format} has no frames")
    if frames > MAX_FRAMES:
        raise corrupt(f"{image.format} claims {frames} frames, above the {MAX_FRAMES} frame limit")
    if image.format not in ("JPEG", "MPO") and frames * width * height > MAX_DECODED_PIXELS:
        raise CrawlError(ErrorClass.TOO_LARGE, f"{frames} frames of {width}x{height} are beyond the decode bound")
    return frames


def _decode_frames(image: Image.Image, image_format: str, width: int, height: int, frames: int) -> None:
    jpeg = image_format in ("JPEG", "MPO")
    if not jpeg and width * height > DECODE_BUDGET_PIXELS:
        raise CrawlError(ErrorClass.TOO_LARGE, f"{image_format} of {width}x{height} is beyond the "
                                               f"{DECODE_BUDGET_PIXELS} pixel decode budget")
    for index in range(frames):
        if index:
            image.seek(index)
        frame_width, frame_height = image.size
        if image_format == "JPEG":
            # draft() picks the smallest DCT scale >= the requested size: 1/8 here,
            # and libjpeg still entropy-decodes every byte of every scan.
            image.draft("RGB", (max(1, frame_width // 8), max(1, frame_height // 8)))
        elif frame_width * frame_height > DECODE_BUDGET_PIXELS:
            # Pillow's draft() leaves an MPO unable to decode its later pictures ("image
            # file is truncated"): an MPO's pictures decode in full, so they must fit the budget.
            raise CrawlError(ErrorClass.TOO_LARGE, f"picture {index + 1} of {frame_width}x{frame_height} is "
                                                   f"beyond the {DECODE_BUDGET_PIXELS} pixel decode budget")
        image.load()  # OSError "image file is truncated" on a cut body


def _decode_png(handle: BinaryIO, width: int, height: int) -> None:
    _check_animation_control(handle)
    if width * height <= DECODE_BUDGET_PIXELS:
        handle.seek(0)
        with Image.open(handle, formats=("PNG",)) as image:
            frames = _frame_count(image, width, height)
            for index in range(frames):
                if index:
                    image.seek(index)
                image.load()
        return
    _inflate_png(handle, width, height)


def _check_animation_control(handle: BinaryIO) -> None:
    """An APNG's acTL must announce at least one frame. Pillow falls back to the default
    image of one that announces none (with only a warning), or failed on it (IndexError)."""
    handle.seek(8)
    while True:
        header = handle.read(8)
        if len(header) < 8:
            return
        length, kind = struct.unpack(">I4s", header)
        if kind == b"IDAT":
            return  # acTL comes before the image data, or not at all
        if kind == b"acTL":
            frames = struct.unpack(">I", handle.read(4).rjust(4, b"\x00"))[0]
            if frames == 0:
                raise corrupt("APNG announces zero frames")
            return
        handle.seek(length + 4, os.SEEK_CUR)


def _inflate_png(handle: BinaryIO, width: int, height: int) -> None:
    """Inflate a large PNG's IDAT stream piecewise: every compressed byte is read, the
    result must be exactly the image's size, and memory stays at one piece."""
    handle.seek(8)
    ihdr = handle.read(25)
    if len(ihdr) < 25 or ihdr[4:8] != b"IHDR":
        raise corrupt("PNG has no IHDR")
    depth, colour, _compression, _filter, interlace = ihdr[16:21]
    if colour not in _PNG_CHANNELS or interlace:
        raise CrawlError(ErrorClass.TOO_LARGE, "a PNG this large is verified only when not interlaced")
    row = 1 + (width * _PNG_CHANNELS[colour] * depth + 7) // 8
    expected, produced = row * height, 0
    inflater = zlib.decompressobj()
    handle.seek(8 + 25)
    while True:
        header = handle.read(8)
        if len(header) < 8:
            raise corrupt("PNG ends before IEND")
        length, kind = struct.unpack(">I4s", header)
        if kind == b"IEND":
            break
        if kind != b"IDAT":
            handle.seek(length + 4, os.SEEK_CUR)
            continue
        remaining = length
        while remaining:
            piece = handle.read(min(remaining, 1 << 20))
            if not piece:
                raise corrupt("PNG is cut inside IDAT")
            remaining -= len(piece)
            data = piece
            while data:
                produced += len(inflater.decompress(data, 1 << 20))
                data = inflater.unconsumed_tail
                if produced > expected:
                    raise corrupt("PNG image data inflates past the image's size")
        handle.seek(4, os.SEEK_CUR)  # the CRC, which verify() checked
    produced += len(inflater.flush())
    if not inflater.eof or produced != expected:
        raise corrupt(f"PNG image data inflates to {produced} bytes, the image needs {expected}")


def _check_gif_trailer(handle: BinaryIO) -> None:
    """A GIF ends with the 0x3B trailer; a cut one does not (Pillow verify() skips GIF)."""
    handle.seek(-1, os.SEEK_END)
    if handle.read(1) != b"\x3b":
        raise corrupt("GIF has no trailer byte: the file is cut")


def _check_riff_length(handle: BinaryIO) -> None:
    """WebP's RIFF header states the file length; a cut file is shorter than that."""
    handle.seek(0)
    header = handle.read(8)
    declared = struct.unpack("<I", header[4:8])[0] + 8
    actual = handle.seek(0, os.SEEK_END)  # a file's or the caller's bytes in memory (verify.py `body`)
    if actual < declared:
        raise corrupt(f"WebP is {actual} bytes, its RIFF header says {declared}")

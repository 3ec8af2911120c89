"""Builders for verification tests: real images from Pillow, MP4 box layouts, a PNG decompression bomb."""
from __future__ import annotations

import io
import struct
import zlib

from PIL import Image


def image_bytes(image_format: str, size=(64, 48), **save_options) -> bytes:
    image = Image.new("RGB", size, (200, 30, 90))
    for x in range(0, size[0], 4):  # some detail, so the encoders produce real scans
        image.putpixel((x, x % size[1]), (x % 256, 255 - x % 256, 0))
    buffer = io.BytesIO()
    image.save(buffer, format=image_format, **save_options)
    return buffer.getvalue()


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bomb(width: int = 100_000, height: int = 100_000) -> bytes:
    """A tiny, well-formed PNG whose header claims width x height pixels."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    pixels = zlib.compress(b"\x00" * 1024)  # a sliver of the claimed data
    return b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header) + png_chunk(b"IDAT", pixels) + png_chunk(b"IEND", b"")


def box(kind: str, payload: bytes = b"", *, large: bool = False) -> bytes:
    if large:  # size field 1, then a 64-bit largesize
        return struct.pack(">I4sQ", 1, kind.encode(), 16 + len(payload)) + payload
    return struct.pack(">I4s", 8 + len(payload), kind.encode()) + payload


FTYP = box("ftyp", b"isom\x00\x00\x02\x00isomiso2avc1mp41")
STYP = box("styp", b"msdh\x00\x00\x00\x00msdhmsix")
MOOV = box("moov", box("mvhd", b"\x00" * 100))
MDAT = box("mdat", b"\x00\x00\x00\x10media-samples-go-here")


def mp4(*boxes: bytes) -> bytes:
    return b"".join(boxes)

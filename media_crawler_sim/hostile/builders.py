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


def full_box(kind: str, payload: bytes, version: int = 0, flags: int = 0) -> bytes:
    return box(kind, struct.pack(">I", (version << 24) | flags) + payload)


# Where a MOOV's chunk offset goes: `mp4()` writes the first mdat's payload offset there.
CHUNK_OFFSET_SENTINEL = b"\xde\xad\xbe\xef"


def sample_table(sizes: tuple[int, ...] = (20,), chunk_offset: bytes = CHUNK_OFFSET_SENTINEL) -> bytes:
    stsz = full_box("stsz", struct.pack(">II", 0, len(sizes)) + b"".join(struct.pack(">I", s) for s in sizes))
    stco = full_box("stco", struct.pack(">I", 1) + chunk_offset)
    return box("stbl", full_box("stsd", struct.pack(">I", 0)) + stsz + stco)


def movie_box(sizes: tuple[int, ...] = (20,), *, fragmented: bool = False) -> bytes:
    trak = box("trak", box("tkhd", b"\x00" * 84) + box("mdia", box("mdhd", b"\x00" * 24) + box("minf", sample_table(sizes))))
    return box("moov", box("mvhd", b"\x00" * 100) + trak + (box("mvex", box("trex", b"\x00" * 24)) if fragmented else b""))


def fragment(samples: int = 1) -> bytes:
    """A moof whose one trun carries `samples` samples."""
    return box("moof", box("mfhd", b"\x00" * 8) + box("traf", box("tfhd", b"\x00" * 8) + full_box("trun", struct.pack(">I", samples))))


FTYP = box("ftyp", b"isom\x00\x00\x02\x00isomiso2avc1mp41")
STYP = box("styp", b"msdh\x00\x00\x00\x00msdhmsix")
MOOV = movie_box()
FRAGMENTED_MOOV = movie_box((), fragmented=True)
MOOF = fragment()
MDAT = box("mdat", b"\x00\x00\x00\x10media-samples-go-here")


def mp4(*boxes: bytes) -> bytes:
    """The boxes in order, with a MOOV's chunk offset pointed at the first mdat's payload."""
    data = b"".join(boxes)
    if CHUNK_OFFSET_SENTINEL in data and b"mdat" in data:
        at = data.index(b"mdat")
        start = at + (12 if data[at - 4:at] == b"\x00\x00\x00\x01" else 4)  # after a 64-bit largesize
        data = data.replace(CHUNK_OFFSET_SENTINEL, struct.pack(">I", start))
    return data


def ebml(element_id: int, payload: bytes) -> bytes:
    """One EBML element: its id bytes, an 8-byte size, the payload."""
    id_bytes = element_id.to_bytes((element_id.bit_length() + 7) // 8, "big")
    return id_bytes + (0x01 << 56 | len(payload)).to_bytes(8, "big") + payload


def webm(*, tracks: bool = True, cluster: bytes | None = b"\xa3\x81\x00") -> bytes:
    """A minimal WebM: EBML header, then a Segment with Tracks and a Cluster."""
    body = (ebml(0x1654AE6B, ebml(0xAE, b"\xd7\x81\x01")) if tracks else b"") + (
        ebml(0x1F43B675, cluster) if cluster is not None else b"")
    return ebml(0x1A45DFA3, ebml(0x4282, b"webm")) + ebml(0x18538067, body)

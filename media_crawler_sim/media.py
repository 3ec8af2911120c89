"""Real, small, deterministic media bytes: JPEG/PNG/GIF through Pillow, and MP4/MOV/DASH
files with a valid ISO-BMFF box structure (ftyp, moov with mvhd and a track, mdat).

Pixels come from a tiny seeded colour grid scaled up, so images decode, compress well
(keeping tests fast) and differ for every key; a thumbnail is the same key at a smaller
size, i.e. a true downscale. Video payloads are seeded random bytes: nothing decodes
the frames, but every box walker and magic-byte check sees a genuine container, with a
sample table (ten samples in one chunk) that fits its mdat.
"""
from __future__ import annotations

import io
import random
import struct
from dataclasses import dataclass, replace

from PIL import Image

MIME_TYPES = {
    "jpeg": "image/jpeg",
    "png": "image/png",
    "gif": "image/gif",
    "mp4": "video/mp4",
    "mov": "video/quicktime",
    "m4s-video": "video/mp4",
    "m4s-audio": "audio/mp4",
}


@dataclass(frozen=True)
class Recipe:
    """How to make one file: format, seed key, and pixel size or byte size."""

    fmt: str
    key: str
    width: int = 0
    height: int = 0
    size: int = 0  # target byte size of a video container

    @property
    def mime(self) -> str:
        return MIME_TYPES[self.fmt]


def render(recipe: Recipe, seed: int) -> bytes:
    """The file's bytes: a function of the recipe and the world seed only."""
    salted = replace(recipe, key=f"{seed}/{recipe.key}")
    if recipe.fmt in ("jpeg", "png"):
        return _still(salted)
    if recipe.fmt == "gif":
        return _gif(salted)
    if recipe.fmt in ("mp4", "mov", "m4s-video", "m4s-audio"):
        return _container(salted)
    raise ValueError(f"unknown media format {recipe.fmt!r}")


def _picture(key: str, width: int, height: int) -> Image.Image:
    rng = random.Random(f"pixels/{key}")
    grid = Image.frombytes("RGB", (6, 4), rng.randbytes(6 * 4 * 3))
    return grid.resize((width, height), Image.Resampling.BICUBIC)


def _still(recipe: Recipe) -> bytes:
    out = io.BytesIO()
    picture = _picture(recipe.key, recipe.width, recipe.height)
    if recipe.fmt == "jpeg":
        picture.save(out, "JPEG", quality=85)
    else:
        picture.save(out, "PNG")
    return out.getvalue()


def _gif(recipe: Recipe) -> bytes:
    frames = [
        _picture(f"{recipe.key}#{index}", recipe.width, recipe.height).convert("P", palette=Image.Palette.ADAPTIVE)
        for index in range(3)
    ]
    out = io.BytesIO()
    frames[0].save(out, "GIF", save_all=True, append_images=frames[1:], duration=200, loop=0)
    return out.getvalue()


# --- ISO base media file format (MP4) boxes -------------------------------------------

def _box(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", 8 + len(payload)) + kind + payload


def _full_box(kind: bytes, payload: bytes, version: int = 0, flags: int = 0) -> bytes:
    return _box(kind, struct.pack(">I", (version << 24) | flags) + payload)


_MATRIX = struct.pack(">9I", 0x10000, 0, 0, 0, 0x10000, 0, 0, 0, 0x40000000)
_TIMESCALE = 1000
_DURATION_MS = 10_000

# (major brand, compatible brands, handler) per container flavour.
_FLAVOURS = {
    "mp4": (b"isom", (b"isom", b"iso2", b"avc1", b"mp41"), b"vide"),
    "mov": (b"qt  ", (b"qt  ",), b"vide"),
    "m4s-video": (b"iso5", (b"iso6", b"mp41", b"dash"), b"vide"),
    "m4s-audio": (b"iso5", (b"iso6", b"mp41", b"dash"), b"soun"),
}


def _ftyp(major: bytes, compatible: tuple[bytes, ...]) -> bytes:
    return _box(b"ftyp", major + struct.pack(">I", 512) + b"".join(compatible))


_SAMPLES = 10  # per file: one chunk of ten samples filling the mdat


def _stbl(payload_size: int, chunk_offset: int) -> bytes:
    """A sample table of _SAMPLES samples in one chunk at `chunk_offset`, filling the payload."""
    base, extra = divmod(payload_size, _SAMPLES)
    sizes = [base] * (_SAMPLES - 1) + [base + extra]
    stsd = _full_box(b"stsd", struct.pack(">I", 1) + _box(b"mp4v", bytes(6) + struct.pack(">H", 1) + bytes(70)))
    stts = _full_box(b"stts", struct.pack(">III", 1, _SAMPLES, _DURATION_MS // _SAMPLES))
    stsc = _full_box(b"stsc", struct.pack(">IIII", 1, 1, _SAMPLES, 1))
    stsz = _full_box(b"stsz", struct.pack(">II", 0, _SAMPLES) + struct.pack(f">{_SAMPLES}I", *sizes))
    stco = _full_box(b"stco", struct.pack(">II", 1, chunk_offset))
    return _box(b"stbl", stsd + stts + stsc + stsz + stco)


def _moov(handler: bytes, width: int, height: int, payload_size: int = 256, chunk_offset: int = 0) -> bytes:
    mvhd = _full_box(
        b"mvhd",
        struct.pack(">IIII", 0, 0, _TIMESCALE, _DURATION_MS)
        + struct.pack(">IH", 0x10000, 0x0100) + bytes(10) + _MATRIX + bytes(24) + struct.pack(">I", 2),
    )
    tkhd = _full_box(
        b"tkhd",
        struct.pack(">IIIII", 0, 0, 1, 0, _DURATION_MS) + bytes(8)
        + struct.pack(">HHHH", 0, 0, 0x0100 if handler == b"soun" else 0, 0) + _MATRIX
        + struct.pack(">II", width << 16, height << 16),
        flags=3,  # enabled, in movie
    )
    mdhd = _full_box(b"mdhd", struct.pack(">IIIIHH", 0, 0, _TIMESCALE, _DURATION_MS, 0x55C4, 0))
    hdlr = _full_box(b"hdlr", bytes(4) + handler + bytes(12) + b"sim\x00")
    minf = _box(b"minf", _stbl(payload_size, chunk_offset))
    return _box(b"moov", mvhd + _box(b"trak", tkhd + _box(b"mdia", mdhd + hdlr + minf)))


def _sidx(referenced_size: int) -> bytes:
    return _full_box(
        b"sidx",
        struct.pack(">IIIIHH", 1, _TIMESCALE, 0, 0, 0, 1)
        + struct.pack(">III", referenced_size & 0x7FFFFFFF, _DURATION_MS, 0x90000000),
    )


def _container(recipe: Recipe) -> bytes:
    major, compatible, handler = _FLAVOURS[recipe.fmt]
    dash = recipe.fmt.startswith("m4s")
    # The moov's length does not depend on the numbers in it: measure it once, then
    # write it with the real payload size and the offset where the samples start.
    head_length = len(_ftyp(major, compatible) + _moov(handler, recipe.width, recipe.height))
    payload_size = max(256, recipe.size - head_length - (44 if dash else 0) - 8)
    samples_at = head_length + (44 if dash else 0) + 8
    head = _ftyp(major, compatible) + _moov(handler, recipe.width, recipe.height, payload_size, samples_at)
    payload = random.Random(f"payload/{recipe.key}").randbytes(payload_size)
    mdat = _box(b"mdat", payload)
    return head + (_sidx(len(mdat)) if dash else b"") + mdat


def dash_segment_base(recipe: Recipe) -> tuple[str, str]:
    """Bilibili's SegmentBase for a DASH track: (Initialization, indexRange) byte ranges,
    i.e. ftyp+moov, then the sidx box."""
    major, compatible, handler = _FLAVOURS[recipe.fmt]
    init_length = len(_ftyp(major, compatible) + _moov(handler, recipe.width, recipe.height))
    return f"0-{init_length - 1}", f"{init_length}-{init_length + 44 - 1}"

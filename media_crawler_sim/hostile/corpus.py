"""A hostile-media corpus, made here from Pillow, our own box builders and a real ffmpeg.

Each entry is (name, bytes, kind, verdict): verdict "store" for genuine media that must
be committed, "refuse" for what must never reach the store: truncations, garbage
entropy-coded data with valid checksums, zero-frame and broken multi-frame images,
documents and executables served as images, MP4 box floods and lying sample tables.
Size lies and compression bombs are properties of the *answer*, not the file: see
server.py's `ANSWERS`.
"""
from __future__ import annotations

import gzip
import io
import random
import struct
import zlib
from pathlib import Path

from PIL import Image

from media_crawler_sim.hostile.builders import FRAGMENTED_MOOV, FTYP, MDAT, MOOV, box, fragment, movie_box, mp4
from media_crawler_sim.hostile.ffmpeg import encode_test_video

Entry = tuple[str, bytes, str, str]


def real_videos(ffmpeg: str, folder: Path) -> dict[str, bytes]:
    """Genuine video made by a real encoder: a judge that decodes (ffmpeg) can only pass
    what has real frames in it, not our box builders' well-formed but empty samples."""
    mpeg4 = ["-c:v", "mpeg4", "-pix_fmt", "yuv420p"]  # ffmpeg's own encoder: in every build
    return {
        "mp4": encode_test_video(ffmpeg, folder / "faststart.mp4", *mpeg4, "-movflags", "+faststart"),
        "mp4_fragmented": encode_test_video(ffmpeg, folder / "fragmented.mp4", *mpeg4, "-g", "5", "-movflags",
                                            "frag_keyframe+empty_moov+default_base_moof"),
        "webm": encode_test_video(ffmpeg, folder / "vp8.webm", "-c:v", "libvpx", "-b:v", "100k"),
    }


def _picture(seed: int, size=(96, 64)) -> Image.Image:
    rng = random.Random(seed)
    grid = Image.frombytes("RGB", (6, 4), rng.randbytes(72))
    return grid.resize(size, Image.Resampling.BICUBIC)


def _save(image: Image.Image, image_format: str, **options) -> bytes:
    out = io.BytesIO()
    image.save(out, image_format, **options)
    return out.getvalue()


def _png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    chunks, offset = [], 8
    while offset < len(data):
        length, kind = struct.unpack_from(">I4s", data, offset)
        chunks.append((kind, data[offset + 8:offset + 8 + length]))
        offset += 12 + length
    return chunks


def _png(chunks: list[tuple[bytes, bytes]]) -> bytes:
    out = b"\x89PNG\r\n\x1a\n"
    for kind, payload in chunks:
        out += struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))
    return out


def _garbage_idat_png(rng: random.Random) -> bytes:
    """Valid CRCs around an IDAT of random bytes: verify() passes, the inflate does not."""
    chunks = _png_chunks(_save(_picture(3), "PNG"))
    return _png([(kind, rng.randbytes(len(payload)) if kind == b"IDAT" else payload) for kind, payload in chunks])


def _zero_frame_apng() -> bytes:
    chunks = _png_chunks(_save(_picture(4), "PNG"))
    actl = (b"acTL", struct.pack(">II", 0, 0))  # an animation of zero frames
    return _png(chunks[:1] + [actl] + chunks[1:])


def _jpeg_with_garbage_scan(rng: random.Random) -> bytes:
    data = bytearray(_save(_picture(5, (256, 192)), "JPEG", quality=90))
    scan = data.index(b"\xff\xda")
    start = scan + 2 + struct.unpack_from(">H", data, scan + 2)[0]
    for index in range(start + 16, len(data) - 2):
        byte = rng.randrange(256)
        data[index] = 0x00 if byte == 0xFF else byte  # no markers: only entropy-coded garbage
    return bytes(data)


def _gif_with_garbage_lzw(rng: random.Random) -> bytes:
    data = bytearray(_save(_picture(6).convert("P"), "GIF"))
    descriptor = data.index(b"\x2c", 13)  # the image descriptor
    offset = descriptor + 10 + 1  # past the descriptor and the LZW minimum code size
    while offset < len(data) and data[offset]:
        length = data[offset]
        data[offset + 1:offset + 1 + length] = rng.randbytes(length)
        offset += 1 + length
    return bytes(data)


def _webp_with_garbage_vp8(rng: random.Random) -> bytes:
    data = bytearray(_save(_picture(7), "WEBP", quality=80))
    chunk = data.index(b"VP8")
    for index in range(chunk + 20, len(data)):
        data[index] = rng.randrange(256)
    return bytes(data)


def _mpo(second_cut: bool = False) -> bytes:
    first, second = _picture(8), _picture(9)
    data = _save(first, "MPO", save_all=True, append_images=[second])
    return data[:-200] if second_cut else data


def _gif_animation(broken_second: bool) -> bytes:
    frames = [_picture(10 + i).convert("P") for i in range(3)]
    data = _save(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100)
    if not broken_second:
        return data
    # cut inside the last frame's data, then close the file again: the trailer is there, a frame is not
    return data[: len(data) * 3 // 4] + b"\x00\x3b"


def media_corpus(videos: dict[str, bytes], seed: int = 17) -> list[Entry]:
    """videos: real_videos(); the box-built MP4s here are only ones that must be refused."""
    rng = random.Random(seed)
    jpeg, png, gif = _save(_picture(1), "JPEG"), _save(_picture(1), "PNG"), _save(_picture(1).convert("P"), "GIF")
    webp = _save(_picture(1), "WEBP")
    entries: list[Entry] = [
        ("jpeg", jpeg, "image", "store"), ("png", png, "image", "store"), ("gif", gif, "image", "store"),
        ("webp", webp, "image", "store"), ("mpo", _mpo(), "image", "store"),
        ("gif_animation", _gif_animation(False), "image", "store"),
        *((name, data, "video", "store") for name, data in videos.items()),
    ]
    for name, data in (("jpeg", jpeg), ("png", png), ("gif", gif), ("webp", webp), *videos.items()):
        for fraction in (0.25, 0.5, 0.9):
            entries.append((f"{name}_cut_{int(fraction * 100)}", data[: int(len(data) * fraction)],
                            "video" if name in videos else "image", "refuse"))
    entries += [
        ("jpeg_cut_before_eoi", jpeg[:-2], "image", "refuse"),
        # libjpeg decodes garbage Huffman data with warnings only, which Pillow does not
        # surface: whether it is refused is the decoder's call ("either"); what the tests
        # demand is that whatever is stored decodes.
        ("jpeg_garbage_scan", _jpeg_with_garbage_scan(rng), "image", "either"),
        ("png_garbage_idat", _garbage_idat_png(rng), "image", "refuse"),
        ("gif_garbage_lzw", _gif_with_garbage_lzw(rng), "image", "refuse"),
        ("webp_garbage_vp8", _webp_with_garbage_vp8(rng), "image", "refuse"),
        ("apng_zero_frames", _zero_frame_apng(), "image", "refuse"),
        ("gif_animation_broken_frame", _gif_animation(True), "image", "refuse"),
        ("mpo_second_picture_cut", _mpo(second_cut=True), "image", "refuse"),
        ("html_title", b"<title>Just a moment...</title><p>checking your browser</p>", "image", "refuse"),
        ("html_div", b"<div id='app'></div><script src='/x.js'></script>", "image", "refuse"),
        ("svg_script", b"<svg xmlns='http://www.w3.org/2000/svg' onload='alert(1)'><script>x</script></svg>",
         "image", "refuse"),
        ("php", b"<?php echo shell_exec($_GET['c']); ?>", "image", "refuse"),
        ("elf", b"\x7fELF\x02\x01\x01\x00" + bytes(56) + rng.randbytes(2000), "image", "refuse"),
        ("json_error", b'{"error": "rate limited"}', "video", "refuse"),
        ("unknown_binary", rng.randbytes(3000), "image", "refuse"),
        ("jpeg_as_video", _save(_picture(2), "JPEG"), "video", "refuse"),
        ("mp4_no_moov", mp4(FTYP, MDAT), "video", "refuse"),
        ("mp4_empty_moov", mp4(FTYP, box("moov", box("mvhd", bytes(100))), MDAT), "video", "refuse"),
        ("mp4_zeroed_mdat", mp4(FTYP, MOOV, box("mdat", bytes(4096))), "video", "refuse"),
        ("mp4_table_past_mdat", mp4(FTYP, movie_box((100_000,)), MDAT), "video", "refuse"),
        ("mp4_fragment_without_samples", mp4(FTYP, FRAGMENTED_MOOV, fragment(0), MDAT), "video", "refuse"),
        ("mp4_box_flood", mp4(FTYP, MOOV, MDAT) + box("free") * 1_000_000, "video", "refuse"),
        ("png_bomb_header", _png([(b"IHDR", struct.pack(">IIBBBBB", 100_000, 100_000, 8, 2, 0, 0, 0)),
                                  (b"IDAT", zlib.compress(bytes(4096))), (b"IEND", b"")]), "image", "refuse"),
    ]
    return entries


def gzip_bomb(uncompressed: int = 512 * 1024**2) -> bytes:
    """A gzip stream of `uncompressed` zero bytes (about 1/1000 of that on the wire)."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as stream:
        block = bytes(1024**2)
        for _ in range(uncompressed // len(block)):
            stream.write(block)
    return out.getvalue()

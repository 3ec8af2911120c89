"""Image verification: real Pillow images pass, cut images fail, decompression bombs are refused without decoding."""
from __future__ import annotations

import struct
import zlib

import pytest
from PIL import Image

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.verify.images import DECODE_BUDGET_PIXELS, verify_image
from media_crawler_sim.hostile.corpus import _mpo, _zero_frame_apng
from media_crawler_sim.hostile.builders import image_bytes, png_bomb, png_chunk


def write(tmp_path, data: bytes, name="img"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def corrupt_message(path, **options) -> str:
    with pytest.raises(CrawlError) as caught:
        verify_image(path, **options)
    assert caught.value.error_class is ErrorClass.CORRUPT_MEDIA
    return caught.value.message


@pytest.mark.parametrize(
    "image_format, media_type", [("JPEG", "image/jpeg"), ("PNG", "image/png"), ("GIF", "image/gif"), ("WEBP", "image/webp")]
)
def test_real_images_pass_with_their_dimensions(tmp_path, image_format, media_type):
    info = verify_image(write(tmp_path, image_bytes(image_format, size=(640, 480))))
    assert (info.media_type, info.width, info.height) == (media_type, 640, 480)


def test_a_jpeg_above_the_decode_budget_is_checked_through_a_reduced_draft(tmp_path):
    info = verify_image(write(tmp_path, image_bytes("JPEG", size=(5000, 4000), quality=70)))
    assert 5000 * 4000 > DECODE_BUDGET_PIXELS and (info.media_type, info.width, info.height) == ("image/jpeg", 5000, 4000)


def test_an_mpo_is_a_jpeg_with_every_picture_decoded(tmp_path):
    info = verify_image(write(tmp_path, _mpo()))
    assert info.media_type == "image/jpeg" and info.frames == 2


@pytest.mark.parametrize("image_format", ["JPEG", "PNG", "GIF", "WEBP"])
@pytest.mark.parametrize("keep", [0.5, 0.9])
def test_truncated_images_are_corrupt(tmp_path, image_format, keep):
    data = image_bytes(image_format, size=(640, 480))
    corrupt_message(write(tmp_path, data[: int(len(data) * keep)]))


def test_a_decompression_bomb_is_refused_from_its_header_without_decoding(tmp_path, monkeypatch):
    def no_decoding(*args, **kwargs):
        raise AssertionError("pixels were decoded")

    monkeypatch.setattr(Image.Image, "load", no_decoding)
    monkeypatch.setattr(Image.Image, "verify", no_decoding)
    message = corrupt_message(write(tmp_path, png_bomb(100_000, 100_000)))
    assert "100000" in message or "bomb" in message


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")  # Pillow warns at 89 MP; we refuse at 100
def test_the_pixel_limit_is_ours_not_only_pillows(tmp_path):
    path = write(tmp_path, png_bomb(12_000, 9_000))  # 108 MP: below Pillow's own error threshold
    assert "pixel limit" in corrupt_message(path)
    small = write(tmp_path, image_bytes("PNG", size=(2000, 1000)), "small")
    assert "pixel limit" in corrupt_message(small, max_pixels=1_000_000)
    assert verify_image(small, max_pixels=2000 * 1000).width == 2000  # the limit itself is allowed


def test_formats_outside_the_list_are_not_parsed(tmp_path):
    corrupt_message(write(tmp_path, image_bytes("BMP")))


def large_png(width: int, height: int, rows: int, *, colour: int = 0, depth: int = 1) -> bytes:
    """A PNG of zero pixels (cheap to build and inflate at any size) whose image data holds `rows` rows."""
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colour]
    row = b"\x00" * (1 + (width * channels * depth + 7) // 8)  # filter byte, then the packed pixels
    packer = zlib.compressobj(1)
    data = b"".join(packer.compress(row * min(256, rows - done)) for done in range(0, rows, 256)) + packer.flush()
    palette = [(b"PLTE", b"\x00\x00\x00")] if colour == 3 else []
    chunks = [(b"IHDR", struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0)), *palette,
              (b"IDAT", data), (b"IEND", b"")]
    return b"\x89PNG\r\n\x1a\n" + b"".join(png_chunk(kind, payload) for kind, payload in chunks)


def one_bit_png(width: int, height: int, rows: int) -> bytes:
    return large_png(width, height, rows)


def test_a_png_above_the_decode_budget_has_its_image_data_inflated_and_sized(tmp_path):
    """Past DECODE_BUDGET_PIXELS Pillow does not decode a PNG; its IDAT stream is still
    inflated in full, and it must come to exactly the image's size."""
    assert 5000 * 4000 > DECODE_BUDGET_PIXELS
    assert "inflates to" in corrupt_message(write(tmp_path, png_bomb(5000, 4000)))  # 1 KB of data for 20 MP
    assert "inflates to" in corrupt_message(write(tmp_path, one_bit_png(5000, 4000, rows=3999), "short"))
    assert "past the image's size" in corrupt_message(write(tmp_path, one_bit_png(5000, 4000, rows=4001), "long"))
    info = verify_image(write(tmp_path, one_bit_png(5000, 4000, rows=4000), "whole"))
    assert (info.media_type, info.width, info.height) == ("image/png", 5000, 4000)


@pytest.mark.parametrize("colour, depth", [(0, 1), (2, 8), (3, 1), (4, 8), (6, 8)],
                         ids=["grey", "rgb", "palette", "grey_alpha", "rgba"])
def test_every_colour_type_above_the_decode_budget_is_sized_by_its_samples(tmp_path, colour, depth):
    """Just above the budget (4001x4000): the expected size counts each colour type's samples."""
    info = verify_image(write(tmp_path, large_png(4001, 4000, 4000, colour=colour, depth=depth), "whole"))
    assert (info.width, info.height) == (4001, 4000)
    short = large_png(4001, 4000, 3999, colour=colour, depth=depth)
    assert "inflates to" in corrupt_message(write(tmp_path, short, "short"))


def test_an_apng_announcing_zero_frames_is_refused(tmp_path):
    assert "zero frames" in corrupt_message(write(tmp_path, _zero_frame_apng()))

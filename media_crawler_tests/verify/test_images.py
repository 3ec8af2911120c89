"""Image verification: real Pillow images pass, cut images fail, decompression bombs are refused without decoding."""
from __future__ import annotations

import struct
import zlib

import pytest
from PIL import Image

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.verify.images import DECODE_BUDGET_PIXELS, verify_image
from media_crawler_tests.verify.media import image_bytes, png_bomb, png_chunk


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


def test_a_large_jpeg_is_checked_through_a_reduced_draft(tmp_path):
    info = verify_image(write(tmp_path, image_bytes("JPEG", size=(4000, 3000), quality=70)))
    assert (info.width, info.height) == (4000, 3000)


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


def test_formats_outside_the_list_are_not_parsed(tmp_path):
    corrupt_message(write(tmp_path, image_bytes("BMP")))


def one_bit_png(width: int, height: int, rows: int) -> bytes:
    """A 1-bit greyscale PNG (cheap to build and inflate at any size) whose image data holds `rows` rows."""
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    row = b"\x00" * (1 + (width + 7) // 8)  # filter byte, then the packed pixels
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header) + png_chunk(b"IDAT", zlib.compress(row * rows, 1))
            + png_chunk(b"IEND", b""))


def test_a_png_above_the_decode_budget_has_its_image_data_inflated_and_sized(tmp_path):
    """Past DECODE_BUDGET_PIXELS Pillow does not decode a PNG; its IDAT stream is still
    inflated in full, and it must come to exactly the image's size."""
    assert 5000 * 4000 > DECODE_BUDGET_PIXELS
    assert "inflates to" in corrupt_message(write(tmp_path, png_bomb(5000, 4000)))  # 1 KB of data for 20 MP
    assert "inflates to" in corrupt_message(write(tmp_path, one_bit_png(5000, 4000, rows=3999), "short"))
    assert "past the image's size" in corrupt_message(write(tmp_path, one_bit_png(5000, 4000, rows=4001), "long"))
    info = verify_image(write(tmp_path, one_bit_png(5000, 4000, rows=4000), "whole"))
    assert (info.media_type, info.width, info.height) == ("image/png", 5000, 4000)

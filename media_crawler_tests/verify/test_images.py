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


def test_formats_outside_the_list_are_not_parsed(tmp_path, monkeypatch):
    from PIL import BmpImagePlugin

    def no_parsing(self):
        raise AssertionError("the BMP parser read downloaded bytes")

    monkeypatch.setattr(BmpImagePlugin.BmpImageFile, "_open", no_parsing)
    assert "does not recognize" in corrupt_message(write(tmp_path, image_bytes("BMP")))


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


def test_a_gif_cut_at_its_last_byte_is_corrupt(tmp_path):
    """Pillow decodes every frame of a GIF without its trailer: only the trailer says it is whole."""
    data = image_bytes("GIF", size=(64, 48))
    assert data.endswith(b"\x3b")
    assert "trailer" in corrupt_message(write(tmp_path, data[:-1]))



def test_many_frames_of_a_large_canvas_are_too_large_before_any_is_decoded(tmp_path):
    """26 one-pixel frames on a 4000x4000 canvas: each fits the decode budget, all of them
    (416 M pixels, as Pillow composes each frame on the canvas) do not."""
    frame = b"\x2c" + struct.pack("<HHHH", 0, 0, 1, 1) + b"\x00" + b"\x02\x02\x44\x01\x00"
    gif = b"GIF89a" + struct.pack("<HH", 4000, 4000) + b"\x80\x00\x00" + b"\x00\x00\x00\xff\xff\xff" + frame * 26 + b"\x3b"
    with pytest.raises(CrawlError) as caught:
        verify_image(write(tmp_path, gif))
    assert caught.value.error_class is ErrorClass.TOO_LARGE and "26 frames" in caught.value.message


def test_every_frame_of_an_animation_is_decoded_not_only_the_first(tmp_path):
    def frame(width: int, height: int) -> bytes:  # one pixel of LZW data, whatever the frame's size
        return b"\x2c" + struct.pack("<HHHH", 0, 0, width, height) + b"\x00" + b"\x02\x02\x44\x01\x00"

    def gif(*frames: bytes) -> bytes:
        return b"GIF89a" + struct.pack("<HH", 8, 8) + b"\x80\x00\x00" + b"\x00\x00\x00\xff\xff\xff" + b"".join(frames) + b"\x3b"

    assert verify_image(write(tmp_path, gif(frame(1, 1), frame(1, 1)))).frames == 2
    assert "truncated" in corrupt_message(write(tmp_path, gif(frame(1, 1), frame(8, 8))))  # the second is cut


def png_with(chunks: list[tuple[bytes, bytes]], *, crc_of: bytes | None = None) -> bytes:
    """A PNG of these chunks; `crc_of`: that chunk gets a wrong CRC."""
    out = b"\x89PNG\r\n\x1a\n"
    for kind, payload in chunks:
        chunk = png_chunk(kind, payload)
        out += chunk[:-4] + b"\x00\x00\x00\x00" if kind == crc_of else chunk
    return out


def small_png_chunks(data: bytes | None = None) -> list[tuple[bytes, bytes]]:
    """A 16x16 grey PNG; `data`: its IDAT stream instead of the whole one."""
    whole = zlib.compress(b"".join(b"\x00" + bytes(range(16)) for _ in range(16)))
    return [(b"IHDR", struct.pack(">IIBBBBB", 16, 16, 8, 0, 0, 0, 0)), (b"tEXt", b"Comment\x00hi"),
            (b"IDAT", whole if data is None else data), (b"IEND", b"")]


def test_a_small_png_is_decoded_and_its_chunks_checked(tmp_path):
    assert verify_image(write(tmp_path, png_with(small_png_chunks()))).width == 16
    whole = small_png_chunks()[2][1]
    corrupt_message(write(tmp_path, png_with(small_png_chunks(whole[: len(whole) // 2])), "cut"))  # CRC right, data cut
    corrupt_message(write(tmp_path, png_with(small_png_chunks(), crc_of=b"tEXt"), "crc"))  # an ancillary chunk's CRC


def test_a_one_pixel_image_is_an_image(tmp_path):
    assert verify_image(write(tmp_path, image_bytes("PNG", size=(1, 1)))).width == 1


def test_a_large_png_whose_image_data_stream_never_ends_is_corrupt(tmp_path):
    """Every row is there, but the zlib stream stops before its end (and its checksum)."""
    whole = one_bit_png(5000, 4000, rows=4000)
    chunks, at = [], 8
    while at < len(whole):
        length, kind = struct.unpack(">I4s", whole[at:at + 8])
        chunks.append((kind, whole[at + 8:at + 8 + length]))
        at += 12 + length
    chunks = [(kind, payload[:-4] if kind == b"IDAT" else payload) for kind, payload in chunks]
    assert "inflates to" in corrupt_message(write(tmp_path, png_with(chunks)))


def test_a_large_interlaced_png_is_too_large_to_verify(tmp_path):
    header = struct.pack(">IIBBBBB", 5000, 4000, 1, 0, 0, 0, 1)  # interlaced
    data = png_with([(b"IHDR", header), (b"IDAT", zlib.compress(b"\x00" * 1024)), (b"IEND", b"")])
    with pytest.raises(CrawlError) as caught:
        verify_image(write(tmp_path, data))
    assert caught.value.error_class is ErrorClass.TOO_LARGE


def test_a_gif_canvas_beyond_the_decode_budget_is_too_large(tmp_path):
    frame = b"\x2c" + struct.pack("<HHHH", 0, 0, 1, 1) + b"\x00" + b"\x02\x02\x44\x01\x00"
    gif = b"GIF89a" + struct.pack("<HH", 5000, 4000) + b"\x80\x00\x00" + b"\x00\x00\x00\xff\xff\xff" + frame + b"\x3b"
    with pytest.raises(CrawlError) as caught:
        verify_image(write(tmp_path, gif))
    assert caught.value.error_class is ErrorClass.TOO_LARGE and "decode budget" in caught.value.message


def test_a_chunk_after_the_image_data_is_checked_too(tmp_path):
    """Pillow's decode stops at the image data; verify() reads every chunk's CRC to IEND."""
    chunks = small_png_chunks()
    after = [chunks[0], chunks[2], (b"tEXt", b"Comment\x00after"), chunks[3]]
    assert verify_image(write(tmp_path, png_with(after), "whole")).width == 16
    corrupt_message(write(tmp_path, png_with(after, crc_of=b"tEXt"), "crc"))


def test_an_mpo_picture_beyond_the_decode_budget_is_too_large(tmp_path):
    import io

    first, second = Image.new("RGB", (64, 48), (1, 2, 3)), Image.new("RGB", (4001, 4000), (9, 9, 9))
    buffer = io.BytesIO()
    first.save(buffer, format="MPO", save_all=True, append_images=[second])
    with pytest.raises(CrawlError) as caught:
        verify_image(write(tmp_path, buffer.getvalue()))
    assert caught.value.error_class is ErrorClass.TOO_LARGE and "picture 2 of 4001x4000" in caught.value.message


def test_every_frame_of_an_apng_is_decoded(tmp_path):
    """The second frame's data cut in half (its chunk's CRC made right): only decoding it tells."""
    import io

    frames = [Image.new("RGB", (16, 16), (shade, 0, 0)) for shade in (0, 60)]
    for frame in frames:
        frame.putpixel((3, 3), (0, 255, 0))
    buffer = io.BytesIO()
    frames[0].save(buffer, format="PNG", save_all=True, append_images=frames[1:])
    data, at, chunks = buffer.getvalue(), 8, []
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        payload = data[at + 8:at + 8 + length]
        chunks.append((kind, payload[:4] + payload[4:4 + (length - 4) // 2] if kind == b"fdAT" else payload))
        at += 12 + length
    assert verify_image(write(tmp_path, data, "whole")).frames == 2
    assert "truncated" in corrupt_message(write(tmp_path, png_with(chunks), "cut"))

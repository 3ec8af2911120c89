"""ISO-BMFF (MP4, MOV, DASH .m4s) verification: the box tree, the sample table, and the data it points at.

What a cut, spliced, zeroed or forged file looks like, and what is checked:
- the top-level boxes add up to the file (a box running past the end is a cut);
- `moov` holds at least one track, and the tracks' sample tables (stsz/stz2,
  stco/co64) name samples whose chunks lie inside an `mdat` and whose sizes fit
  the media data there; a fragmented file (moov with mvex) instead needs `moof`
  fragments whose `trun`s carry samples, each followed by its `mdat`;
- the media data is not all zeros where the table says samples start.

Memory stays bounded whatever the file claims: top-level boxes are visited by
seeking from header to header and never collected (at most MAX_TOP_LEVEL_BOXES
of them), only `moov` and `moof` payloads are read (each at most
MAX_INDEX_BYTES), and nested boxes are walked to a fixed depth.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from media_crawler.errors import CrawlError, ErrorClass

# A complete file opens with ftyp (or, for old QuickTime, a moov/mdat/wide/free box);
# a DASH media segment with styp, or sidx / moof when the packager left the type out.
FIRST_BOX_TYPES = ("ftyp", "styp", "sidx", "moof")
SEGMENT_FIRST_BOX_TYPES = ("styp", "sidx", "moof")
MAX_TOP_LEVEL_BOXES = 200_000  # two hours of 1 s fragments is 14,400
MAX_INDEX_BYTES = 64 * 1024**2  # a moov of a multi-hour film is a few MB
MAX_DEPTH = 12
ZERO_PROBE_BYTES = 4096
MAX_ZERO_PROBES = 8


@dataclass(frozen=True)
class Box:
    type: str
    offset: int
    size: int  # whole box, header included
    header: int = 8

    @property
    def payload_start(self) -> int:
        return self.offset + self.header

    @property
    def end(self) -> int:
        return self.offset + self.size


@dataclass
class _Layout:
    first: str | None = None
    count: int = 0
    mdats: list[tuple[int, int]] = field(default_factory=list)  # payload (start, end)
    moov: bytes | None = None
    fragment_samples: int = 0
    fragments_without_data: int = 0


def corrupt(message: str) -> CrawlError:
    return CrawlError(ErrorClass.CORRUPT_MEDIA, f"MP4 {message}")


def verify_mp4(path: str | os.PathLike) -> None:
    """Raise CrawlError(corrupt_media) unless the file is a whole MP4 (or DASH segment) with media in it."""
    path = Path(path)
    file_size = path.stat().st_size
    with open(path, "rb") as handle:
        layout = _walk(handle, file_size)
        if layout.count == 0:
            raise corrupt("is empty")
        if layout.first not in FIRST_BOX_TYPES:
            raise corrupt(f"starts with {layout.first!r}, not ftyp/styp")
        if not layout.mdats:
            raise corrupt("has no mdat: no media data")
        if layout.first in SEGMENT_FIRST_BOX_TYPES:
            if layout.fragment_samples == 0:
                raise corrupt("segment has no moof with samples")
            return
        if layout.moov is None:
            raise corrupt("has no moov: nothing describes its samples")
        tracks = list(_tracks(layout.moov))
        if not tracks:
            raise corrupt("moov holds no track with a sample table")
        if _has_child(layout.moov, "mvex"):  # fragmented: the samples are in the moofs
            if layout.fragment_samples == 0:
                raise corrupt("is fragmented but no moof carries samples")
            if layout.fragments_without_data:
                raise corrupt(f"{layout.fragments_without_data} fragment(s) have no mdat after them")
            return
        total_samples = 0
        for table in tracks:
            total_samples += _check_sample_table(table, layout.mdats)
        if total_samples == 0:
            raise corrupt("sample tables are empty")
        _check_not_zeroed(handle, tracks)


def _walk(handle, file_size: int) -> _Layout:
    layout = _Layout()
    offset = 0
    pending_moof = False
    while offset < file_size:
        box = _read_header(handle, offset, file_size)
        layout.count += 1
        if layout.count > MAX_TOP_LEVEL_BOXES:
            raise corrupt(f"has more than {MAX_TOP_LEVEL_BOXES} top-level boxes (a box flood)")
        if layout.first is None:
            layout.first = box.type
        if box.type == "mdat":
            layout.mdats.append((box.payload_start, box.end))
            pending_moof = False
        elif box.type == "moov":
            if layout.moov is not None:
                raise corrupt("has two moov boxes")
            layout.moov = _read_payload(handle, box)
        elif box.type == "moof":
            if pending_moof:
                layout.fragments_without_data += 1
            layout.fragment_samples += _fragment_samples(_read_payload(handle, box))
            pending_moof = True
        offset = box.end
    if pending_moof:
        layout.fragments_without_data += 1
    return layout


def _read_header(handle, offset: int, file_size: int) -> Box:
    handle.seek(offset)
    header = handle.read(8)
    if len(header) < 8:
        raise corrupt(f"ends inside a box header at byte {offset}")
    size, raw_type = struct.unpack(">I4s", header)
    box_type = _box_type(raw_type, offset)
    header_size = 8
    if size == 1:  # 64-bit largesize follows the type
        large = handle.read(8)
        if len(large) < 8:
            raise corrupt(f"ends inside a 64-bit box header at byte {offset}")
        size = struct.unpack(">Q", large)[0]
        header_size = 16
    elif size == 0:  # "extends to the end of the file": only legal for the last box
        size = file_size - offset
    if size < header_size:
        raise corrupt(f"box {box_type!r} at byte {offset} has impossible size {size}")
    if offset + size > file_size:
        raise corrupt(f"box {box_type!r} at byte {offset} needs {size} bytes but the file ends at {file_size} (cut body)")
    return Box(box_type, offset, size, header_size)


def _box_type(raw: bytes, offset: int) -> str:
    # Box types are four printable ASCII characters (Apple's '©xyz' never
    # appears at top level); anything else means we are reading payload bytes.
    if not all(0x20 <= byte < 0x7F for byte in raw):
        raise corrupt(f"has garbage where a box type belongs at byte {offset}")
    return raw.decode("ascii")


def _read_payload(handle, box: Box) -> bytes:
    length = box.size - box.header
    if length > MAX_INDEX_BYTES:
        raise corrupt(f"{box.type} of {length} bytes is beyond the {MAX_INDEX_BYTES} byte bound")
    handle.seek(box.payload_start)
    data = handle.read(length)
    if len(data) < length:
        raise corrupt(f"{box.type} is cut")
    return data


def _children(data: bytes, start: int = 0, end: int | None = None) -> Iterator[tuple[str, int, int]]:
    """(type, payload start, payload end) of the boxes in data[start:end]."""
    end = len(data) if end is None else end
    offset = start
    while offset + 8 <= end:
        size, raw_type = struct.unpack_from(">I4s", data, offset)
        header = 8
        if size == 1:
            if offset + 16 > end:
                raise corrupt("index box ends inside a 64-bit header")
            size = struct.unpack_from(">Q", data, offset + 8)[0]
            header = 16
        elif size == 0:
            size = end - offset
        if size < header or offset + size > end:
            raise corrupt(f"index box at offset {offset} has an impossible size {size}")
        yield raw_type.decode("latin-1"), offset + header, offset + size
        offset += size
    if offset != end and end - offset >= 8:
        raise corrupt("index boxes do not add up")


def _find(data: bytes, path: tuple[str, ...], start: int = 0, end: int | None = None) -> Iterator[tuple[int, int]]:
    """Payload ranges of the boxes at `path` below data[start:end]."""
    if len(path) > MAX_DEPTH:
        return
    for box_type, child_start, child_end in _children(data, start, end):
        if box_type == path[0]:
            if len(path) == 1:
                yield child_start, child_end
            else:
                yield from _find(data, path[1:], child_start, child_end)


def _has_child(data: bytes, box_type: str) -> bool:
    return any(child == box_type for child, _s, _e in _children(data))


@dataclass(frozen=True)
class _SampleTable:
    data: bytes
    start: int
    end: int

    def box(self, *types: str) -> tuple[str, int, int] | None:
        for box_type, child_start, child_end in _children(self.data, self.start, self.end):
            if box_type in types:
                return box_type, child_start, child_end
        return None


def _tracks(moov: bytes) -> Iterator[_SampleTable]:
    """The sample table of every track (a trak without one describes nothing we can check)."""
    for start, end in _find(moov, ("trak", "mdia", "minf", "stbl")):
        yield _SampleTable(moov, start, end)


def _check_sample_table(table: _SampleTable, mdats: list[tuple[int, int]]) -> int:
    """The number of samples the table describes, after checking they fit the media data."""
    sizes_box = table.box("stsz", "stz2")
    offsets_box = table.box("stco", "co64")
    if sizes_box is None or offsets_box is None:
        raise corrupt("track has no sample sizes (stsz) or chunk offsets (stco)")
    sample_count, total_bytes = _sample_sizes(table.data, sizes_box)
    if sample_count == 0:
        return 0
    chunk_offsets = _chunk_offsets(table.data, offsets_box)
    if not chunk_offsets:
        raise corrupt("track has samples but no chunks")
    for offset in chunk_offsets:
        if not any(start <= offset < end for start, end in mdats):
            raise corrupt(f"a chunk at byte {offset} lies outside every mdat")
    media_bytes = sum(end - start for start, end in mdats)
    if total_bytes > media_bytes:
        raise corrupt(f"samples need {total_bytes} bytes, the mdat holds {media_bytes}")
    return sample_count


def _sample_sizes(data: bytes, box: tuple[str, int, int]) -> tuple[int, int]:
    box_type, start, end = box
    if end - start < 12:
        raise corrupt(f"{box_type} is too short")
    if box_type == "stsz":
        uniform, count = struct.unpack_from(">II", data, start + 4)
        if uniform:
            return count, uniform * count
        if start + 12 + 4 * count > end:
            raise corrupt("stsz lists more samples than it holds")
        sizes = struct.unpack_from(f">{count}I", data, start + 12) if count else ()
        return count, sum(sizes)
    field_size = data[start + 7]
    count = struct.unpack_from(">I", data, start + 8)[0]
    if field_size not in (4, 8, 16) or start + 12 + (count * field_size + 7) // 8 > end:
        raise corrupt("stz2 is malformed")
    if field_size == 16:
        return count, sum(struct.unpack_from(f">{count}H", data, start + 12))
    if field_size == 8:
        return count, sum(data[start + 12:start + 12 + count])
    packed = data[start + 12:start + 12 + (count + 1) // 2]
    return count, sum((byte >> 4) + (byte & 15) for byte in packed)


def _chunk_offsets(data: bytes, box: tuple[str, int, int]) -> tuple[int, ...]:
    box_type, start, end = box
    if end - start < 8:
        raise corrupt(f"{box_type} is too short")
    count = struct.unpack_from(">I", data, start + 4)[0]
    width = 8 if box_type == "co64" else 4
    if start + 8 + width * count > end:
        raise corrupt(f"{box_type} lists more chunks than it holds")
    return struct.unpack_from(f">{count}{'Q' if width == 8 else 'I'}", data, start + 8) if count else ()


def _fragment_samples(moof: bytes) -> int:
    """Samples the fragment's trun boxes carry."""
    samples = 0
    for start, end in _find(moof, ("traf", "trun")):
        if end - start < 8:
            raise corrupt("trun is too short")
        samples += struct.unpack_from(">I", moof, start + 4)[0]
    return samples


def _check_not_zeroed(handle, tracks: list[_SampleTable]) -> None:
    """Where the tables say samples start, the bytes are not all zero (a zeroed mdat keeps
    every size and offset right and holds no picture or sound)."""
    probes = []
    for table in tracks:
        offsets_box = table.box("stco", "co64")
        if offsets_box is not None:
            probes.extend(_chunk_offsets(table.data, offsets_box)[:MAX_ZERO_PROBES])
    for offset in probes[:MAX_ZERO_PROBES]:
        handle.seek(offset)
        if handle.read(ZERO_PROBE_BYTES).strip(b"\x00"):
            return
    raise corrupt("media data is all zeros where the samples start")

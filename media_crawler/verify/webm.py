"""WebM / Matroska verification: the EBML header, a Segment that fits the file, and
inside it the Tracks and at least one Cluster that carry the media.

Element headers are read one by one with seeks (a Cluster's payload is never read),
at most MAX_ELEMENTS of them, so memory stays bounded whatever the file claims.
"""
from __future__ import annotations

import os
from pathlib import Path

from media_crawler.errors import CrawlError, ErrorClass

EBML_ID, SEGMENT_ID, TRACKS_ID, CLUSTER_ID = 0x1A45DFA3, 0x18538067, 0x1654AE6B, 0x1F43B675
MAX_ELEMENTS = 200_000


def corrupt(message: str) -> CrawlError:
    return CrawlError(ErrorClass.CORRUPT_MEDIA, f"WebM {message}")


def verify_webm(path: str | os.PathLike) -> None:
    path = Path(path)
    file_size = path.stat().st_size
    with open(path, "rb") as handle:
        element, size, start = _element(handle, 0, file_size)
        if element != EBML_ID or size is None:
            raise corrupt("does not open with an EBML header")
        offset = start + size
        element, size, start = _element(handle, offset, file_size)
        if element != SEGMENT_ID:
            raise corrupt("has no Segment after its header")
        end = file_size if size is None else start + size
        if end > file_size:
            raise corrupt(f"Segment needs {end} bytes but the file ends at {file_size} (cut body)")
        seen, offset, count = set(), start, 0
        while offset < end:
            count += 1
            if count > MAX_ELEMENTS:
                raise corrupt(f"Segment holds more than {MAX_ELEMENTS} elements")
            element, size, payload = _element(handle, offset, end)
            if size is None:  # a live-stream Cluster of unknown size: the rest of the segment
                seen.add(element)
                break
            if element == CLUSTER_ID and size == 0:
                raise corrupt("has an empty Cluster")
            seen.add(element)
            offset = payload + size
        if TRACKS_ID not in seen or CLUSTER_ID not in seen:
            raise corrupt("Segment has no Tracks or no Cluster: no media in it")


def _element(handle, offset: int, limit: int) -> tuple[int, int | None, int]:
    """(element id, payload size or None for unknown, payload offset)."""
    handle.seek(offset)
    element = _vint(handle, offset, keep_marker=True, max_length=4)
    header_end = handle.tell()
    size = _vint(handle, offset, keep_marker=False, max_length=8)
    payload = handle.tell()
    if size is not None and payload + size > limit:
        raise corrupt(f"element {element:#x} at byte {offset} runs past byte {limit} (cut body)")
    if header_end > limit:
        raise corrupt(f"ends inside an element header at byte {offset}")
    return element, size, payload


def _vint(handle, offset: int, *, keep_marker: bool, max_length: int) -> int | None:
    first = handle.read(1)
    if not first:
        raise corrupt(f"ends inside an element header at byte {offset}")
    byte = first[0]
    length = 1
    while length <= max_length and not byte & (0x80 >> (length - 1)):
        length += 1
    if length > max_length:
        raise corrupt(f"has an invalid element header at byte {offset}")
    rest = handle.read(length - 1)
    if len(rest) < length - 1:
        raise corrupt(f"ends inside an element header at byte {offset}")
    value = byte if keep_marker else byte & (0xFF >> length)
    for extra in rest:
        value = (value << 8) | extra
    if not keep_marker and value == (1 << (7 * length)) - 1:
        return None  # all ones: size unknown
    return value

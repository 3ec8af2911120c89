"""HTTP byte ranges (RFC 9110 §14) for one representation, as CDNs serve them.

Only a single range is honoured; a multi-range or malformed header is ignored and the
whole body sent, which RFC 9110 allows and real CDNs do. A resumable downloader
relies on exactly these answers: 206 + Content-Range for a satisfiable range, 416 +
`Content-Range: bytes */size` past the end, and 200 (whole body) when If-Range no
longer matches, i.e. the file changed since the partial download.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ByteRange:
    start: int
    end: int  # inclusive

    @property
    def length(self) -> int:
        return self.end - self.start + 1

    def content_range(self, size: int) -> str:
        return f"bytes {self.start}-{self.end}/{size}"


class Unsatisfiable(Exception):
    """The range starts at or after the end of the representation: answer 416."""


def requested_range(range_header: str | None, if_range: str | None, etag: str, last_modified: str, size: int) -> ByteRange | None:
    """The range to serve, or None for the whole body; raises Unsatisfiable for 416."""
    if not range_header:
        return None
    if if_range is not None and if_range.strip() not in (etag, last_modified):
        return None  # validator changed: the client must start over with the new body
    unit, _, spec = range_header.partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return None
    first, dash, last = spec.strip().partition("-")
    if not dash:
        return None
    try:
        if first == "":  # suffix range: the last N bytes
            count = int(last)
            if count <= 0:
                raise Unsatisfiable
            return ByteRange(max(0, size - count), size - 1)
        start = int(first)
        end = int(last) if last else size - 1
    except ValueError:
        return None
    if start >= size:
        raise Unsatisfiable
    if end < start:
        return None
    return ByteRange(start, min(end, size - 1))

"""WARC/1.1 records, each written as its own gzip member (ISO 28500; the `.warc.gz`
convention every reader expects), so an index can point at a record by offset and length.

A record is its WARC headers, a block (the HTTP message, or the resource's bytes) and
two CRLFs. The block is streamed: a payload of gigabytes passes in chunks through the
compressor, never whole in memory. Everything written is a function of the inputs
(the gzip header carries no time), so an export of the same ledger is the same bytes.
"""
from __future__ import annotations

import uuid
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import BinaryIO, Iterable

WARC_VERSION = b"WARC/1.1"
CHUNK = 1024 * 1024
REVISIT_PROFILE = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
HTTP_RESPONSE_TYPE = "application/http; msgtype=response"
HTTP_REQUEST_TYPE = "application/http; msgtype=request"
# Record ids are UUIDs named by what the record is (type, URI, date, payload): the same
# ledger gives the same ids, and two different records never share one.
_ID_NAMESPACE = uuid.UUID("5d1c1fb4-5b8e-4a53-9f39-5c0f3e4a7c21")


def warc_date(epoch: float) -> str:
    """WARC-Date: UTC, to the second (the 14-digit CDXJ timestamp is the same instant)."""
    return datetime.fromtimestamp(int(epoch), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def cdx_timestamp(epoch: float) -> str:
    return datetime.fromtimestamp(int(epoch), tz=timezone.utc).strftime("%Y%m%d%H%M%S")


def record_id(*parts: str) -> str:
    return f"<urn:uuid:{uuid.uuid5(_ID_NAMESPACE, chr(31).join(parts))}>"


def sha256_digest(hex_digest: str) -> str:
    """A WARC digest of sha256, written as Browsertrix and py-wacz do: `sha256:<hex>`."""
    return f"sha256:{hex_digest}"


@dataclass
class Record:
    """One WARC record: its headers (WARC-Record-ID, Content-Length and WARC/1.1 are the
    writer's), then `head` (the HTTP status line and headers, or nothing) and `payload`."""
    headers: list[tuple[str, str]]
    head: bytes = b""
    payload: BinaryIO | bytes = b""
    payload_length: int = 0


@dataclass(frozen=True)
class Written:
    offset: int  # of the record's gzip member in the file
    length: int  # of that member


def http_head(status_line: str, headers: Iterable[tuple[str, str]]) -> bytes:
    """An HTTP/1.1 message head: the status (or request) line, the headers, the blank line.
    Header values never carry a line break (a hostile one would forge headers)."""
    lines = [status_line] + [f"{_one_line(name)}: {_one_line(value)}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "replace")


def _one_line(text: str) -> str:
    return text.replace("\r", " ").replace("\n", " ")


class WarcWriter:
    """Writes records to `out` (a binary file opened for writing), each a gzip member."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.offset = 0

    def write(self, record: Record) -> Written:
        block_length = len(record.head) + record.payload_length
        lines = [WARC_VERSION.decode()] + [f"{name}: {_one_line(value)}" for name, value in record.headers]
        lines.append(f"Content-Length: {block_length}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "replace")
        compressor = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: a gzip member, mtime 0
        start = self.offset
        self._emit(compressor.compress(head))
        self._emit(compressor.compress(record.head))
        copied = self._copy_payload(record, compressor)
        if copied != record.payload_length:
            raise ValueError(f"payload of {copied} bytes, {record.payload_length} announced")
        self._emit(compressor.compress(b"\r\n\r\n"))
        self._emit(compressor.flush())
        return Written(start, self.offset - start)

    def _copy_payload(self, record: Record, compressor) -> int:
        if isinstance(record.payload, (bytes, bytearray)):
            self._emit(compressor.compress(record.payload))
            return len(record.payload)
        copied = 0
        while chunk := record.payload.read(CHUNK):
            copied += len(chunk)
            self._emit(compressor.compress(chunk))
        return copied

    def _emit(self, data: bytes) -> None:
        if data:
            self.out.write(data)
            self.offset += len(data)

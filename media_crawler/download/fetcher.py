"""One download attempt: stream a media URL into a staging .part, resuming when it is safe.

The .part is the only state: its bytes, plus the validator (strong ETag or
Last-Modified) of the response that wrote them, which the caller keeps and
hands back. Resume sends `Range: bytes=N-` with `If-Range: <validator>`, so the
server itself decides whether the stored prefix is still the current version:
206 from N appends, 200 means "changed or no ranges" and the .part restarts
from zero. Two versions of a file are never spliced.

Memory stays at one chunk whatever the file size; the sha256 is computed while
writing (after re-hashing the kept prefix on resume), so nothing re-reads the
file before the store commit.
"""
from __future__ import annotations

import hashlib
import http.client
import os
import socket
import zlib
from dataclasses import field, replace
from typing import Callable, Iterator, NamedTuple

import urllib3

from media_crawler.models import item_record
from media_crawler.download.media_transport import CarriesMedia, MediaTransport
from media_crawler.download.responses import (
    MediaResponse,
    open_following_redirects,
    parse_content_length,
    parse_content_range,
    raise_for_status,
    resume_validator,
)
from media_crawler.download.request import DownloadPolicy, DownloadRequest
from media_crawler.download.writeback import EarlyWriteback
from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.http import redact_url
from media_crawler.scrub import excerpt
from media_crawler.store.cas import storage_error
from media_crawler.verify.signatures import HEAD_BYTES, check_media_head

_READ_ERRORS = (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError)
# Classes after which the .part holds nothing worth resuming.
_DISCARD_PART_CLASSES = (ErrorClass.BAD_SIGNATURE, ErrorClass.TOO_LARGE, ErrorClass.HASH_MISMATCH)
# A body up to this size, written whole by one attempt, is kept in memory for verification
# (DownloadResult.body): at thousands of small files, reading each .part back was seven
# system calls a file (open, fstat, isatty, seek, reads, close). One chunk's worth: at most
# one such body per worker thread is held at a time.
KEEP_BODY_BYTES = 256 * 1024


@item_record
class DownloadResult:
    sha256: str
    size: int  # bytes in the finished .part
    etag: str | None
    last_modified: str | None
    content_type: str | None
    resumed_from: int  # offset this attempt continued from (0: whole body fetched)
    bytes_received: int  # body bytes this attempt received
    status: int = 200  # of the response that completed the .part (206 for a resume, 416: it was whole)
    date: str | None = None  # its Date header
    # The whole file's bytes when it is small (KEEP_BODY_BYTES) and this attempt wrote all of
    # it: the very bytes hashed, written and fsynced, so verification decodes these instead
    # of opening and reading the .part back (settle.py `verify_staged`). None otherwise.
    body: bytes | None = field(default=None, repr=False, compare=False)

    def response_said(self) -> dict[str, str | int]:
        """What the response that completed the item said, for the archive (the ledger's
        media_response): status, content type, ETag, Last-Modified, Date (those it sent)."""
        said = {"status": self.status, "content_type": self.content_type, "etag": self.etag,
                "last_modified": self.last_modified, "date": self.date}
        return {name: value for name, value in said.items() if value is not None}

    @property
    def validator(self) -> str | None:
        return resume_validator(self.etag, self.last_modified)


class _WritePlan(NamedTuple):  # a tuple: made per item, and a frozen dataclass's __init__ is a setattr per field
    offset: int  # where the response body starts in the file
    total: int | None  # the file's full length, when the server said it
    decode: bool  # body is content-encoded (gzip...): decode, and lengths do not apply


def download_to_part(
    session: CarriesMedia | MediaTransport,
    request: DownloadRequest,
    policy: DownloadPolicy,
    on_validator: Callable[[str | None], None] | None = None,
) -> DownloadResult:
    """Fetch `request.url` into `request.part_path`; raise CrawlError on any failure.

    Reads the request's url, part_path, headers, validator and expected_size,
    and the policy's limits (bytes, redirects, url_policy, timeouts, chunk size);
    retries, budget and re-resolution are retry.py's. on_validator: called as
    soon as the response headers are accepted with the validator that now
    describes the .part, so a failed attempt can still be resumed by the next one.
    """
    # The .part as text: every use is a system call (stat, open, unlink), which a Path
    # reaches through __fspath__ each time.
    part_path, validator, max_bytes = os.fspath(request.part_path), request.validator, policy.body_limit(request)
    # Only a .part with a validator can be resumed; without one its size does not matter
    # (the .part is opened truncated before any new validator is announced, below).
    existing = _part_size(part_path) if validator else 0
    resume_from = existing if existing > 0 and validator else 0
    request_headers = {**request.headers, "Accept-Encoding": "identity"}
    if resume_from:
        request_headers.update({"Range": f"bytes={resume_from}-", "If-Range": validator})

    response = open_following_redirects(
        session, request.url, request_headers, timeouts=policy.timeouts, url_policy=policy.url_policy,
        max_redirects=policy.max_redirects,
    )
    with response:
        safe_url = redact_url(response.url or request.url)
        etag, last_modified = response.headers.get("ETag"), response.headers.get("Last-Modified")
        content_type, date = response.headers.get("Content-Type"), response.headers.get("Date")
        if response.status_code == 416 and resume_from:
            digest = _complete_part_digest(response, part_path, existing, validator)
            if digest is None:  # the .part is not the whole current file: start over
                response.close()
                _truncate(part_path)
                return download_to_part(session, replace(request, validator=None), policy, on_validator)
            return DownloadResult(digest, existing, etag, last_modified, content_type, existing, 0,
                                  response.status_code, date)
        raise_for_status(response, safe_url)
        plan = _plan_write(response, resume_from, max_bytes, safe_url, part_path)
        if plan.offset == 0 and existing:
            # Drop the old bytes before announcing the new validator, so no
            # moment exists where the new validator describes old bytes.
            _truncate(part_path)
        new_validator = None if plan.decode else resume_validator(etag, last_modified)
        # Opened before the new validator is announced: a whole body opens the .part
        # truncated, so no moment exists where the new validator describes old bytes.
        handle = _open_part(part_path, plan.offset)
        with handle:
            if on_validator is not None:
                # A 206 without validator headers continues the version `validator` named.
                on_validator(new_validator or (validator if plan.offset else None))
            _apply_stall_timeout(response, policy.timeouts.stall)
            try:
                digest, received, body = _stream_body(
                    response, handle, part_path, plan, policy.chunk_size, max_bytes, content_type, safe_url
                )
                if not request.keep_body:
                    body = None  # the caller holds its share of bodies: verification reads the .part
            except CrawlError as error:
                if error.error_class in _DISCARD_PART_CLASSES:
                    discard_part(part_path)
                raise
        _keep_connection(response)
    return DownloadResult(digest, plan.offset + received, etag, last_modified, content_type, plan.offset, received,
                          response.status_code, date, body)


def _plan_write(
    response: MediaResponse, resume_from: int, max_bytes: int, safe_url: str, part_path: str
) -> _WritePlan:
    encoding = response.headers.get("Content-Encoding", "").strip().lower()
    decode = encoding not in ("", "identity")
    if response.status_code == 206:
        content_range = parse_content_range(response.headers.get("Content-Range"))
        if decode or content_range is None or content_range.start != resume_from:
            # Not the continuation we asked for: nothing safe to append. The next
            # attempt starts clean (no .part, so no Range).
            discard_part(part_path)
            raise CrawlError(ErrorClass.TRUNCATED_BODY, f"206 from {safe_url} does not continue at byte {resume_from}")
        plan = _WritePlan(resume_from, content_range.total, False)
    else:  # 200: a whole body, whether or not we asked for a range
        total = None if decode else parse_content_length(response.headers.get("Content-Length"))
        plan = _WritePlan(0, total, decode)
    if plan.total is not None and plan.total > max_bytes:
        discard_part(part_path)
        raise CrawlError(ErrorClass.TOO_LARGE, f"{safe_url} announces {plan.total} bytes, limit {max_bytes}")
    return plan


def _open_part(part_path: str, offset: int):
    """The .part opened to append at `offset` (a resume), or truncated to write a whole body."""
    # Unbuffered: the chunks are large already, and a buffered file would
    # add an isatty and a seek per file for nothing.
    mode = "ab" if offset else "wb"
    try:
        try:
            return open(part_path, mode, buffering=0)
        except FileNotFoundError:  # the staging folder is made once, not before every file
            os.makedirs(os.path.dirname(part_path) or ".", exist_ok=True)
            return open(part_path, mode, buffering=0)
    except OSError as exc:
        raise storage_error(exc, "opening the .part") from exc


def _stream_body(
    response: MediaResponse,
    handle,
    part_path: str,
    plan: _WritePlan,
    chunk_size: int,
    max_bytes: int,
    content_type: str | None,
    safe_url: str,
) -> tuple[str, int, bytes | None]:
    """Append the body to the .part (`handle`, open at plan.offset) and fsync it; return
    (sha256 of the whole file, bytes received, the whole file's bytes when small: KEEP_BODY_BYTES)."""
    digest = hashlib.sha256()
    if plan.offset:
        try:
            _hash_prefix(part_path, plan.offset, digest)
        except OSError as exc:
            raise storage_error(exc, "reading the .part") from exc
    received, head = 0, b""
    kept: list[bytes] | None = None if plan.offset else []  # a resumed file's start is not in memory
    writeback = EarlyWriteback(handle.fileno(), plan.offset)
    for chunk in _read_chunks(response, chunk_size, plan.decode, safe_url, lambda: received):
        if plan.offset == 0 and len(head) < HEAD_BYTES:
            # Sniff the start of the file once HEAD_BYTES are in (or at the end).
            head += chunk[: HEAD_BYTES - len(head)]
            if len(head) >= HEAD_BYTES:
                check_media_head(head, content_type)
        received += len(chunk)
        if plan.offset + received > max_bytes:
            raise CrawlError(ErrorClass.TOO_LARGE, f"{safe_url} sent more than {max_bytes} bytes (cut there)")
        digest.update(chunk)
        _write(handle, chunk)
        if kept is not None:
            if received <= KEEP_BODY_BYTES:
                kept.append(chunk)
            else:
                kept = None  # too large to hold: verification reads the .part
        writeback.written_up_to(plan.offset + received)
    if plan.offset == 0 and len(head) < HEAD_BYTES:
        check_media_head(head, content_type)
    _fsync(handle)
    size = plan.offset + received
    if plan.total is not None and size < plan.total:
        raise CrawlError(ErrorClass.TRUNCATED_BODY, f"{safe_url} ended at byte {size} of {plan.total}")
    if plan.total is not None and size > plan.total:
        raise CrawlError(ErrorClass.HASH_MISMATCH, f"{safe_url} sent {size} bytes, more than its {plan.total}")
    body = (kept[0] if len(kept) == 1 else b"".join(kept)) if kept else None
    return digest.hexdigest(), received, body


def _read_chunks(
    response: MediaResponse, chunk_size: int, decode: bool, safe_url: str, received: Callable[[], int]
) -> Iterator[bytes]:
    """The body in chunks of at most chunk_size, with read failures turned into error classes.

    urllib3's read1 is used directly: it returns whatever has arrived (read()
    and iter_content wait to fill the whole chunk, and a stall or a cut then
    loses those buffered bytes instead of leaving them in the .part for
    resume), and it raises ReadTimeoutError for a stall rather than the
    generic ConnectionError iter_content makes of it.

    A content-encoded body (sent although we asked for identity) is inflated
    here, at most chunk_size bytes at a time: urllib3 would inflate each raw
    read whole, and one 256 KiB read of a gzip bomb is gigabytes.
    """
    inflate = _Inflater(response.headers.get("Content-Encoding", ""), chunk_size, safe_url) if decode else None
    while True:
        try:
            chunk = response.raw.read1(chunk_size, decode_content=False)
        except _READ_ERRORS as exc:
            raise _classify_read_error(exc, received(), safe_url) from None
        if not chunk:
            if inflate is not None:
                inflate.finish()
            return
        if inflate is None:
            yield chunk
        else:
            yield from inflate.feed(chunk)


class _Inflater:
    """gzip / deflate, decompressed with a bound on each output piece."""

    def __init__(self, encoding: str, piece: int, safe_url: str) -> None:
        name = encoding.strip().lower()
        if name in ("gzip", "x-gzip"):
            wbits = 16 + zlib.MAX_WBITS
        elif name == "deflate":
            wbits = zlib.MAX_WBITS  # zlib-wrapped, as RFC 9110 means it
        else:
            raise CrawlError(ErrorClass.BAD_SIGNATURE, f"{safe_url} sent Content-Encoding {excerpt(repr(name), 22)}, which is not accepted")
        self._inflater, self._piece, self._url = zlib.decompressobj(wbits), piece, safe_url

    def feed(self, data: bytes) -> Iterator[bytes]:
        try:
            out = self._inflater.decompress(data, self._piece)
            while True:
                if out:
                    yield out
                if not self._inflater.unconsumed_tail:
                    return
                out = self._inflater.decompress(self._inflater.unconsumed_tail, self._piece)
        except zlib.error:
            raise CrawlError(ErrorClass.TRUNCATED_BODY, f"{self._url} sent a broken compressed body") from None

    def finish(self) -> None:
        if not self._inflater.eof:
            raise CrawlError(ErrorClass.TRUNCATED_BODY, f"{self._url} ended inside its compressed body")


def _classify_read_error(exc: BaseException, received: int, safe_url: str) -> CrawlError:
    if isinstance(exc, (urllib3.exceptions.ReadTimeoutError, socket.timeout)):
        return CrawlError(ErrorClass.NETWORK_TIMEOUT, f"body of {safe_url} stalled after {received} bytes")
    if received:
        return CrawlError(ErrorClass.TRUNCATED_BODY, f"body of {safe_url} cut after {received} bytes ({type(exc).__name__})")
    return CrawlError(ErrorClass.CONNECTION_RESET, f"connection to {safe_url} dropped before the body ({type(exc).__name__})")


def _complete_part_digest(response: MediaResponse, part_path: str, existing: int, validator: str | None) -> str | None:
    """416 to our Range: the sha256 of the .part if it already is the whole current file, else None."""
    content_range = parse_content_range(response.headers.get("Content-Range"))
    current = resume_validator(response.headers.get("ETag"), response.headers.get("Last-Modified"))
    if content_range is None or content_range.total != existing or (current is not None and current != validator):
        return None
    digest = hashlib.sha256()
    _hash_prefix(part_path, existing, digest)
    return digest.hexdigest()


def _hash_prefix(part_path: str, length: int, digest) -> None:
    with open(part_path, "rb") as handle:
        remaining = length
        while remaining:
            block = handle.read(min(remaining, 1024 * 1024))
            if not block:
                raise CrawlError(ErrorClass.TRUNCATED_BODY, ".part shrank while being resumed")
            digest.update(block)
            remaining -= len(block)


def _keep_connection(response: MediaResponse) -> None:
    """The body was read to its end: hand the connection back to the pool for the next request.

    `MediaResponse.close()` closes the socket (right for a body left half
    read), so without this every download would pay a new TCP connection (and
    the server a new thread). A body that ended early raised before this point,
    and its connection is closed as usual.
    """
    try:
        response.raw.release_conn()
    except Exception:  # never fail a finished download over connection bookkeeping
        pass


def _apply_stall_timeout(response: MediaResponse, seconds: float) -> None:
    """From here on, the socket's read timeout is the stall limit between body chunks.

    The request itself used timeouts.read (time to the response headers);
    urllib3 resets the socket timeout on the next request over this connection.
    """
    sock = getattr(getattr(response.raw, "connection", None), "sock", None)
    # settimeout is a system call even when nothing changes (the stall limit is
    # usually the read timeout the request already set).
    if sock is not None and sock.gettimeout() != seconds:
        sock.settimeout(seconds)


def _part_size(part_path: str) -> int:
    try:
        return os.stat(part_path).st_size
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise storage_error(exc, "reading the .part") from exc


def _truncate(part_path: str) -> None:
    try:
        discard_part(part_path)
    except OSError as exc:
        raise storage_error(exc, "discarding the .part") from exc


def discard_part(part_path: str | os.PathLike[str]) -> None:
    """Remove the .part if it is there (Path.unlink(missing_ok=True), for a text path too)."""
    try:
        os.unlink(part_path)
    except FileNotFoundError:
        pass


def _write(handle, chunk: bytes) -> None:
    try:
        written = handle.write(chunk)
        while written < len(chunk):  # a raw file may take less than all (a signal, a nearly full disk)
            written += handle.write(memoryview(chunk)[written:])
    except OSError as exc:
        raise storage_error(exc, "writing the .part") from exc


def _fsync(handle) -> None:
    try:
        handle.flush()
        os.fsync(handle.fileno())
    except OSError as exc:
        raise storage_error(exc, "syncing the .part") from exc

"""What the archive says about each kept API answer and each committed item, as WARC records.

- An API answer: a `response` record (the kept status line, headers and body, whose
  sha256 is the payload digest) and its `request` record (`WARC-Concurrent-To` the
  response). The request is the GET line and Host: the request's own headers carried
  credentials and are not kept. The same bytes kept before (the first kept answer with
  that sha256, by fetch time: an unchanged page walked again) make a `revisit` of the
  identical-payload-digest profile instead of the response, with this fetch's status
  line and headers and no body, referring to that first answer's URI and date.
- A committed item: one `response` of status 200 whose payload is the verified blob,
  whatever answers brought its bytes (a download resumed over several 206 answers is
  one record), with what the completing response said (Content-Type, ETag,
  Last-Modified, Date). Its URI is the media URL (scrubbed, signatures dropped) while the
  ledger has it, else the item's canonical URL. A blob the crawler made (a DASH mux) is
  a `resource`: nobody served it.
- The same bytes committed before (the first commit of that sha256 in the whole
  ledger, so also one in an earlier export's cut) make a `revisit` of the
  identical-payload-digest profile, referring to that first capture's URI and date.

Every date comes from the ledger, every record id from what the record is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO, Callable
from urllib.parse import urlsplit

from media_crawler.export.warc import (
    HTTP_REQUEST_TYPE, HTTP_RESPONSE_TYPE, REVISIT_PROFILE, Record, http_head, record_id, sha256_digest, warc_date)
from media_crawler.scrub import archive_uri
from media_crawler.store.answers import FirstCapture, KeptAnswer
from media_crawler.store.ledger import MUX_VARIANT
from media_crawler.store.reports.reads import CommittedRow

# The media types a kind falls back to when the completing response named none.
FALLBACK_TYPES = {"image": "image/jpeg", "video": "video/mp4", "audio": "audio/mp4"}
OCTETS = "application/octet-stream"


@dataclass(frozen=True)
class IndexEntry:
    """What the CDXJ index says of a record besides where it is (cdxj-indexer's fields)."""
    url: str
    epoch: float
    mime: str
    status: str | None
    digest: str


def answer_records(answer: KeptAnswer, first: FirstCapture | None,
                   open_body: Callable[[], BinaryIO]) -> tuple[Record, Record, IndexEntry]:
    """The response (or revisit of `first`, the first answer of the same bytes, when that is
    another row) and request records of a kept answer; open_body: its blob, opened."""
    date = warc_date(answer.fetched_at)
    digest = sha256_digest(answer.sha256)
    head = http_head(f"HTTP/1.1 {answer.status} {answer.reason}".rstrip(),
                     [*answer.headers, ("Content-Length", str(answer.size))])
    mime = _mime(_header(answer.headers, "Content-Type") or OCTETS)
    if first is not None and first.id != answer.id:
        response_id = record_id("revisit", answer.url, date, digest)
        response = Record(headers=[
            ("WARC-Type", "revisit"), ("WARC-Record-ID", response_id), ("WARC-Date", date),
            ("WARC-Target-URI", answer.url), ("WARC-Profile", REVISIT_PROFILE),
            ("WARC-Refers-To-Target-URI", first.url), ("WARC-Refers-To-Date", warc_date(first.fetched_at)),
            ("WARC-Payload-Digest", digest), ("Content-Type", HTTP_RESPONSE_TYPE),
        ], head=head)
        mime = "warc/revisit"
    else:
        response_id = record_id("response", answer.url, date, digest)
        response = Record(headers=[
            ("WARC-Type", "response"), ("WARC-Record-ID", response_id), ("WARC-Date", date),
            ("WARC-Target-URI", answer.url), ("WARC-Payload-Digest", digest), ("Content-Type", HTTP_RESPONSE_TYPE),
        ], head=head, payload=open_body(), payload_length=answer.size)
    request = Record(headers=[
        ("WARC-Type", "request"), ("WARC-Record-ID", record_id("request", answer.url, date, digest)),
        ("WARC-Date", date), ("WARC-Target-URI", answer.url), ("WARC-Concurrent-To", response_id),
        ("Content-Type", HTTP_REQUEST_TYPE),
    ], head=_request_head(answer.url))
    return response, request, IndexEntry(answer.url, answer.fetched_at, mime, str(answer.status), digest)


def _request_head(url: str) -> bytes:
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return http_head(f"GET {target} HTTP/1.1", [("Host", parts.netloc)])


def item_uri(row: CommittedRow) -> str:
    """The URI the archive files an item under: its media URL's archive_uri, or the one
    compaction kept when it released that URL (media_response's `uri`), else (committed
    without a download of its own) its canonical URL."""
    if row.media_url:
        return archive_uri(row.media_url)
    kept = (row.media_response or {}).get("uri")
    return str(kept) if kept else row.canonical_url


def item_date(row: CommittedRow) -> float:
    """When its bytes were captured: the download's end, else (committed without a
    download of its own) the commit."""
    return row.finished_at or row.committed_at or 0.0


def item_record(row: CommittedRow, first: CommittedRow | None,
                open_blob: Callable[[str], BinaryIO]) -> tuple[Record, IndexEntry]:
    """The record of a committed item: its response (or resource), or a revisit of `first`
    (the first commit of the same bytes) when that is another row."""
    uri, epoch = item_uri(row), item_date(row)
    date, digest = warc_date(epoch), sha256_digest(row.sha256)
    content_type = _content_type(row)
    said = row.media_response or {}
    if first is not None and first.id != row.id:
        head = http_head("HTTP/1.1 200 OK", _item_headers(content_type, row.size or 0, said))
        record = Record(headers=[
            ("WARC-Type", "revisit"), ("WARC-Record-ID", record_id("revisit", uri, date, digest)),
            ("WARC-Date", date), ("WARC-Target-URI", uri), ("WARC-Profile", REVISIT_PROFILE),
            ("WARC-Refers-To-Target-URI", item_uri(first)), ("WARC-Refers-To-Date", warc_date(item_date(first))),
            ("WARC-Payload-Digest", digest), ("Content-Type", HTTP_RESPONSE_TYPE),
        ], head=head)
        return record, IndexEntry(uri, epoch, "warc/revisit", "200", digest)
    size = row.size or 0
    if row.variant == MUX_VARIANT:
        record = Record(headers=[
            ("WARC-Type", "resource"), ("WARC-Record-ID", record_id("resource", uri, date, digest)),
            ("WARC-Date", date), ("WARC-Target-URI", uri), ("WARC-Payload-Digest", digest),
            ("WARC-Block-Digest", digest), ("Content-Type", content_type),
        ], payload=open_blob(row.sha256), payload_length=size)
        return record, IndexEntry(uri, epoch, _mime(content_type), None, digest)
    record = Record(headers=[
        ("WARC-Type", "response"), ("WARC-Record-ID", record_id("response", uri, date, digest)),
        ("WARC-Date", date), ("WARC-Target-URI", uri), ("WARC-Payload-Digest", digest),
        ("Content-Type", HTTP_RESPONSE_TYPE),
    ], head=http_head("HTTP/1.1 200 OK", _item_headers(content_type, size, said)),
        payload=open_blob(row.sha256), payload_length=size)
    return record, IndexEntry(uri, epoch, _mime(content_type), "200", digest)


def _item_headers(content_type: str, size: int, said: dict) -> list[tuple[str, str]]:
    headers = [("Content-Type", content_type), ("Content-Length", str(size))]
    for name, key in (("ETag", "etag"), ("Last-Modified", "last_modified"), ("Date", "date")):
        if said.get(key):
            headers.append((name, str(said[key])))
    return headers


def _content_type(row: CommittedRow) -> str:
    said = (row.media_response or {}).get("content_type")
    if said and not said.lower().startswith(("text/html", "application/octet-stream")):
        return str(said)
    mime = row.meta.get("mime_type") if isinstance(row.meta, dict) else None
    return str(mime or said or FALLBACK_TYPES.get(row.kind, OCTETS))


def _mime(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower() or OCTETS


def _header(headers: tuple[tuple[str, str], ...], name: str) -> str | None:
    return next((value for key, value in headers if key.lower() == name.lower()), None)

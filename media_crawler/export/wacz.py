"""The WACZ file (a ZIP, the Webrecorder packaging of WARCs; `wacz validate` checks it):

- `archive/data.warc.gz`: the WARC records (export/records.py), kept as written
  (ZIP_STORED: a reader seeks into it by the index's offsets, so it is not compressed again);
- `indexes/index.cdx`: CDXJ, one line per response, resource and revisit record,
  `<surt> <14-digit timestamp> {url, mime, status, digest, length, offset, filename}`,
  sorted by its bytes (export/sorted_lines.py);
- `pages/pages.jsonl`: a header line, then one `{id, url, ts, title}` per post (its
  platform URL, title and publication time);
- `datapackage.json`: the `data-package` profile, `wacz_version`, and every file above
  with its `sha256:` hash and bytes; `datapackage-digest.json`: the hash of that file.

The WACZ version written is 1.1.1, the one py-wacz (0.6) validates and Browsertrix writes.
The file is made beside `out` and renamed onto it whole. Everything in it is a function
of the ledger and the blobs: `created` is the newest capture it holds, so an export of
the same ledger is the same bytes.
"""
from __future__ import annotations

import functools
import hashlib
import heapq
import json
import os
import shutil
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO, Iterator

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.export.records import IndexEntry, answer_records, item_date, item_record
from media_crawler.export.sorted_lines import SortedLines
from media_crawler.export.surt import surt
from media_crawler.export.warc import Record, WarcWriter, cdx_timestamp, record_id, warc_date
from media_crawler.scrub import scrub_url
from media_crawler.store.answers import FirstCapture, KeptAnswer, first_answer_of, kept_answers
from media_crawler.store.blob_store import BlobStore
from media_crawler.store.ledger import Ledger
from media_crawler.store.reports.reads import CommittedRow, committed_rows, first_commit_of

WACZ_VERSION = "1.1.1"
WARC_NAME = "archive/data.warc.gz"
INDEX_NAME = "indexes/index.cdx"
PAGES_NAME = "pages/pages.jsonl"
PAGES_HEADER = {"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}
SOFTWARE = "media-crawler"
FIRST_ANSWERS_REMEMBERED = 10_000
ZIP_EPOCH = 315532800  # 1980-01-01: the earliest time a ZIP entry can carry


@dataclass
class ExportScope:
    """What an export holds: captures in [since, until) (unix seconds), of one platform."""
    since: float | None = None
    until: float | None = None
    platform: str | None = None


@dataclass
class ExportCounts:
    answers: int = 0
    answer_revisits: int = 0  # of `answers`: a body kept before (an unchanged page walked again)
    responses: int = 0
    revisits: int = 0
    pages: int = 0
    bytes: int = 0
    newest: float = 0.0
    resources: list[dict] = field(default_factory=list)


class _Hashing:
    """A write-only stream that hashes and counts what passes to `out`."""

    def __init__(self, out: BinaryIO) -> None:
        self.out, self.digest, self.size = out, hashlib.sha256(), 0

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        self.size += len(data)
        return self.out.write(data)

    def resource(self, path: str) -> dict:
        return {"name": Path(path).name.lower(), "path": path, "hash": f"sha256:{self.digest.hexdigest()}",
                "bytes": self.size}


def export_wacz(out: str | os.PathLike, ledger: Ledger, media: BlobStore, answers: BlobStore,
                scope: ExportScope) -> ExportCounts:
    """Write the WACZ of `scope` to `out`; returns what it holds."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # Named after `out`, not random: an export killed mid-way leaves these two, and the
    # next export to the same file starts by clearing them (a restart converges).
    partial, scratch = out.with_name(f".{out.name}.part"), out.with_name(f".{out.name}.sorting")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    counts = ExportCounts()
    try:
        index, pages = SortedLines(scratch), SortedLines(scratch)
        try:
            with zipfile.ZipFile(partial, "w", allowZip64=True) as package:
                # The WARC first: its records fill the index and page lines.
                with package.open(_entry(WARC_NAME, zipfile.ZIP_STORED), "w", force_zip64=True) as entry:
                    hashing = _Hashing(entry)
                    _write_warc(WarcWriter(hashing), ledger, media, answers, scope, index, pages, counts)
                counts.resources.append(hashing.resource(WARC_NAME))
                created = max(counts.newest, ZIP_EPOCH)
                counts.resources.append(_write_lines(package, INDEX_NAME, index.lines()))
                header = json.dumps(PAGES_HEADER).encode() + b"\n"
                counts.resources.append(_write_lines(package, PAGES_NAME, _then(header, _one_per_post(pages.lines()))))
                datapackage = json.dumps({
                    "profile": "data-package", "wacz_version": WACZ_VERSION, "title": "media-crawler export",
                    "created": _iso(created), "software": SOFTWARE, "resources": counts.resources,
                }, indent=2).encode()
                package.writestr(_entry("datapackage.json"), datapackage)
                package.writestr(_entry("datapackage-digest.json"), json.dumps(
                    {"path": "datapackage.json", "hash": f"sha256:{hashlib.sha256(datapackage).hexdigest()}"},
                    indent=2).encode())
            os.replace(partial, out)
        finally:
            partial.unlink(missing_ok=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    counts.bytes = out.stat().st_size
    return counts


def _write_warc(writer: WarcWriter, ledger: Ledger, media: BlobStore, answers: BlobStore, scope: ExportScope,
                index: SortedLines, pages: SortedLines, counts: ExportCounts) -> None:
    writer.write(_warcinfo())
    # The first answer of each body, remembered: an unchanged page walked every day is one
    # sha256 for many answers (it does not change during an export: a compact releasing
    # answers beside it may fail the export, see docs/EXPORT.md).
    @functools.lru_cache(maxsize=FIRST_ANSWERS_REMEMBERED)
    def first_answer(sha256: str) -> FirstCapture | None:
        return first_answer_of(ledger, sha256)

    for _when, _kind, _order, thing in heapq.merge(_answers(ledger, scope), _items(ledger, scope)):
        if isinstance(thing, KeptAnswer):
            answer: KeptAnswer = thing
            bodies: list[BinaryIO] = []

            def open_body() -> BinaryIO:
                bodies.append(_opened(answers, answer.sha256, answer.url))
                return bodies[-1]

            try:
                response, request, entry = answer_records(answer, first_answer(answer.sha256), open_body)
                _index(index, entry, writer.write(response))
            finally:
                for stream in bodies:
                    stream.close()
            writer.write(request)
            counts.answers += 1
            counts.answer_revisits += entry.mime == "warc/revisit"
            counts.newest = max(counts.newest, answer.fetched_at)
            continue
        row: CommittedRow = thing
        first = first_commit_of(ledger, row.sha256)
        opened: list[BinaryIO] = []

        def open_blob(sha256: str) -> BinaryIO:
            opened.append(_opened(media, sha256, row.canonical_url))
            return opened[-1]

        try:
            record, entry = item_record(row, first, open_blob)
            _index(index, entry, writer.write(record))
        finally:
            for stream in opened:
                stream.close()
        if entry.mime == "warc/revisit":
            counts.revisits += 1
        else:
            counts.responses += 1
        counts.newest = max(counts.newest, item_date(row))
        page = _page(row)
        if page is not None:
            pages.add(page)


def _opened(store: BlobStore, sha256: str, url: str) -> BinaryIO:
    """The blob, or a classified error naming it: an archive that silently lacks a record
    would pass for whole."""
    try:
        return store.open(sha256)
    except FileNotFoundError:
        raise CrawlError(ErrorClass.STORAGE_ERROR, f"blob {sha256} of {scrub_url(url)} is not in the store "
                         "(media-crawler reconcile finds and repairs lost blobs)") from None


def _answers(ledger: Ledger, scope: ExportScope) -> Iterator[tuple]:
    for order, answer in enumerate(kept_answers(ledger, since=scope.since, until=scope.until,
                                                platform=scope.platform)):
        yield answer.fetched_at, 0, order, answer


def _items(ledger: Ledger, scope: ExportScope) -> Iterator[tuple]:
    for order, row in enumerate(committed_rows(ledger, since=scope.since, until=scope.until,
                                               platform=scope.platform)):
        yield row.committed_at or 0.0, 1, order, row


def _index(index: SortedLines, entry: IndexEntry, written) -> None:
    fields = {"url": entry.url, "mime": entry.mime, "status": entry.status, "digest": entry.digest,
              "length": str(written.length), "offset": str(written.offset), "filename": Path(WARC_NAME).name}
    fields = {name: value for name, value in fields.items() if value is not None}
    index.add(f"{surt(entry.url)} {cdx_timestamp(entry.epoch)} {json.dumps(fields, ensure_ascii=False)}")


def _page(row: CommittedRow) -> str | None:
    """The post an item belongs to, as a page line: its platform URL, title, publication time."""
    meta = row.meta if isinstance(row.meta, dict) else {}
    url = meta.get("post_url") or row.canonical_url.split("#", 1)[0]
    if not url:
        return None
    ts = row.published_at or _iso(row.committed_at or 0.0)
    page = {"id": hashlib.sha256(url.encode()).hexdigest()[:32], "url": url, "ts": ts}
    if meta.get("title"):
        page["title"] = str(meta["title"])
    # Keyed by the URL (sorted lines are grouped by it), one page per post kept below.
    return f"{page['id']}\t{json.dumps(page, ensure_ascii=False, sort_keys=True)}"


def _one_per_post(lines: Iterator[bytes]) -> Iterator[bytes]:
    """The first page line of each post (its items may disagree on a title: a part's)."""
    previous = None
    for line in lines:
        key, page = line.split(b"\t", 1)
        if key != previous:
            previous = key
            yield page


def _warcinfo() -> Record:
    fields = f"software: {SOFTWARE}\r\nformat: WARC File Format 1.1\r\n".encode()
    return Record(headers=[
        ("WARC-Type", "warcinfo"), ("WARC-Record-ID", record_id("warcinfo", WARC_NAME)),
        ("WARC-Date", warc_date(ZIP_EPOCH)), ("WARC-Filename", Path(WARC_NAME).name),
        ("Content-Type", "application/warc-fields"),
    ], payload=fields, payload_length=len(fields))


def _then(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


def _write_lines(package: zipfile.ZipFile, name: str, lines: Iterator[bytes]) -> dict:
    with package.open(_entry(name), "w", force_zip64=True) as entry:
        hashing = _Hashing(entry)
        for line in lines:
            hashing.write(line)
    return hashing.resource(name)


def _entry(name: str, compress: int = zipfile.ZIP_DEFLATED) -> zipfile.ZipInfo:
    """A ZIP entry dated 1980-01-01: an entry's time would be the export's, which is not
    the archive's (`created` and the WARC dates are), and would make two exports differ."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = compress
    info.external_attr = 0o644 << 16
    return info


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(int(epoch), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

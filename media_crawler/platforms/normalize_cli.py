"""`media-crawler normalize PLATFORM FILE...`: what a saved API response yields.

Each file's shape is detected (Bilibili arc/search, view, playurl, pagelist,
nav; Weibo getIndex, ajax mymblog / feed statuses, show; Facebook posts
page, single post, video node or edge; a URL feed) and its records printed
to stdout, one JSON object per line. An error response prints one object
with error_class, platform_code and message, and the exit status is 1.
Per-item errors (and notes such as "pagelist has no media") go to stderr as
JSON objects and do not stop the rest.

Files are decoded as the crawl decodes answers (safe_json): a file the crawl
would refuse (NaN, an overflowing number, nesting past the bound) prints a
parse_error line, never a traceback, and every line printed is valid UTF-8.
A Bilibili view answer given with playurl answers names their video: a
playurl alone is keyed `unknown:{cid}`, its cid read from the answer.

Each platform's detector is its spec's `normalize` (platforms/<name>/detect.py;
platform_spec.py), so a registered third-party platform normalizes here too.
"""
from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import Any, Callable, Iterable, TextIO

from media_crawler.errors import CrawlError
from media_crawler.models import MediaRecord
from media_crawler.platforms.base import FeedItem
from media_crawler.platform_spec import PlatformSettings
from media_crawler.platforms.detect import Context, Note
from media_crawler.platforms.items import MALFORMED, check_record
from media_crawler.platforms.responses import parse_error
from media_crawler.platforms.safe_json import clean_text, loads

Detector = Callable[[Any, PlatformSettings, "datetime | None", Note, "Context | None"], Iterable[FeedItem]]
_ENVELOPE_KEYS = {"error", "code", "ok"}  # Graph errors, Bilibili and Weibo envelopes


def run_normalize(
    platform: str,
    files: list[str],
    out: TextIO | None = None,
    err: TextIO | None = None,
    settings: PlatformSettings | None = None,
    now: datetime | None = None,
) -> int:
    """0 when every file normalized (per-item errors allowed), 1 when a file
    is an error response or cannot be read.

    The files are read first: a Bilibili view answer among them names the
    video (bvid, part number, title) of the playurl answers for its cids."""
    out, err = out or sys.stdout, err or sys.stderr
    settings = settings or PlatformSettings()
    if detector(platform) is None:
        _emit(out, {"error_class": "parse_error", "platform_code": None,
                    "message": f"unknown platform {clean_text(repr(platform))}"})
        return 1
    loaded: list[tuple[str, list[Any] | CrawlError]] = []
    for path in files:
        try:
            loaded.append((path, _responses_in(_load(platform, path))))
        except CrawlError as error:
            loaded.append((path, error))
    context = Context.of(platform, [body for _, bodies in loaded if isinstance(bodies, list) for body in bodies])
    status = 0
    for path, bodies in loaded:
        status |= normalize_bodies(platform, path, bodies, out, err, settings, now, context)
    return status


def normalize_text(
    platform: str,
    text: str | bytes,
    out: TextIO,
    err: TextIO,
    settings: PlatformSettings | None = None,
    now: datetime | None = None,
    where: str = "<text>",
) -> int:
    """`run_normalize` of one saved answer given as text (what a file would hold)."""
    try:
        bodies: list[Any] | CrawlError = _responses_in(_decode(platform, text, where))
    except CrawlError as error:
        bodies = error
    context = Context.of(platform, bodies if isinstance(bodies, list) else [])
    return normalize_bodies(platform, where, bodies, out, err, settings or PlatformSettings(), now, context)


def normalize_bodies(
    platform: str,
    path: str,
    bodies: list[Any] | CrawlError,
    out: TextIO,
    err: TextIO,
    settings: PlatformSettings,
    now: datetime | None,
    context: "Context",
) -> int:
    """Print what each saved answer of one file yields; 1 when one is an error."""
    shown = clean_text(path)

    def note(info: dict) -> None:
        _emit(err, {"file": shown, **info})

    if isinstance(bodies, CrawlError):
        _emit(out, {"file": shown, **bodies.as_dict()})
        return 1
    status = 0
    detect = detector(platform)
    if detect is None:
        _emit(out, {"file": shown, "error_class": "parse_error", "platform_code": None,
                    "message": f"unknown platform {clean_text(repr(platform))}"})
        return 1
    for body in bodies:
        try:
            for item in detect(body, settings, now, note, context):
                if isinstance(item, MediaRecord):
                    print(clean_text(check_record(item).to_json()), file=out)
                else:
                    note({"error_class": item.error_class, "platform_code": item.platform_code,
                          "message": item.message, "item_id": item.item_id})
        except CrawlError as error:
            _emit(out, {"file": shown, **error.as_dict()})
            status = 1
        except MALFORMED as exc:  # a response-level object (a view, a show) whose shape drifted
            drift = parse_error(platform, f"{shown}: {exc}")
            _emit(out, {"file": shown, **drift.as_dict()})
            status = 1
    return status


def _emit(stream: TextIO, info: dict) -> None:
    print(clean_text(json.dumps(info, ensure_ascii=False, default=str)), file=stream)


def _load(platform: str, path: str) -> Any:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise parse_error(platform, f"cannot read {clean_text(path)}: {exc}") from None
    return _decode(platform, raw, path)


def _decode(platform: str, raw: str | bytes, where: str) -> Any:
    """The saved answer through the crawl's own decoder (safe_json): the same
    refusals (NaN, overflowing numbers, deep nesting) as an API answer."""
    try:
        return loads(raw)
    except (ValueError, TypeError) as exc:
        raise parse_error(platform, f"cannot read {clean_text(where)}: {exc}") from None


def _responses_in(body: Any) -> list[Any]:
    """The saved responses a file holds: usually one; a list of envelopes
    (a collection of error examples) is several; a recorded exchange
    `{"status", "headers", "json"}` is its body."""
    if isinstance(body, list) and body and all(isinstance(b, dict) and _ENVELOPE_KEYS & b.keys() for b in body):
        return [_unwrap(b) for b in body]
    return [_unwrap(body)]


def _unwrap(body: Any) -> Any:
    return body["json"] if isinstance(body, dict) and "json" in body and "status" in body else body


def detector(platform: str) -> Detector | None:
    """The platform's answer detector (`PlatformSpec.normalize`), None for an unknown one."""
    from media_crawler.platforms.registry import specs

    spec = specs().get(platform)
    return spec.load("normalize") if spec is not None else None



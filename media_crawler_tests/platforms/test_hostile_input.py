"""Hostile values, one by one: the decoder's refusals, the field helpers' ranges,
the ledger's limits, `media-crawler normalize` on the crash signatures of the
issue, and malformed URL feeds through the URL-list adapter into a ledger."""
from __future__ import annotations

import io
import json
import math
from datetime import date, datetime, timezone

import pytest

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.models import DayWindow, ItemError, MediaRecord
from media_crawler.platforms.registry import parse_source
from media_crawler.platform_spec import PlatformSettings
from media_crawler.platforms.fields import (
    INT64_MAX, INT64_MIN, MissingField, as_float, as_int, as_list, as_size, as_str, from_unix, https_on, parse_iso,
)
from media_crawler.platforms.items import check_record, guarded
from media_crawler.platforms.normalize_cli import normalize_text, run_normalize
from media_crawler.platforms.responses import decode_json
from media_crawler.platforms.safe_json import MAX_DEPTH, JsonRefused, loads, preview
from media_crawler.platforms.urls.client import UrlsAdapter
from media_crawler.store.ledger import Ledger

from .fakes import CheckedTransport, response

# -- the decoder -------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "NaN", "[Infinity]", '{"size": -Infinity}', "[1e400]", '{"a": -1e400}', "1" * 4301,
    "[" * 1000 + "]" * 1000, '{"a":' * 1000 + "1" + "}" * 1000, "[" * 100_000, "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),
    "[[]," * 150 + "[" * 60 + "]" * 60 + "]" * 150,  # deep without a long run of openers
])
def test_the_decoder_refuses_what_json_loads_takes_or_crashes_on(text):
    with pytest.raises(JsonRefused if not text.startswith("1") else ValueError):
        loads(text)


def test_the_decoder_keeps_what_is_json():
    assert loads("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    assert loads(str(2**64)) == 2**64  # ids may be big: fields.as_int range-checks what becomes a column
    assert loads('["' + "[" * 5000 + '", "\\"[[[", "\\\\"]') == ["[" * 5000, '"[[[', "\\"]  # brackets in strings
    assert loads("1e-400") == 0.0 and loads('"\\ud83d\\ude00"') == "😀"
    assert loads(b'\xef\xbb\xbf{"a": "\xff"}') == {"a": "\ufffd"}  # BOM dropped, invalid UTF-8 replaced


def test_lone_surrogates_and_nul_become_replacement_characters():
    value = loads('{"\\udc00k": ["\\ud800", "a\\u0000b", "\ud800raw"], "ok": "\\ud83d\\ude00"}')
    assert value == {"\ufffdk": ["\ufffd", "a\ufffdb", "\ufffdraw"], "ok": "😀"}
    json.dumps(value, ensure_ascii=False).encode("utf-8")


def test_decode_json_turns_every_refusal_into_a_parse_error_with_the_body():
    for text in ("[1e400]", "NaN", "[" * 5000, '{"a": "\\ud800'):
        with pytest.raises(CrawlError) as caught:
            decode_json("urls", response(200, text, url="https://feed.example/f.json"))
        assert caught.value.error_class == ErrorClass.PARSE_ERROR
        assert caught.value.raw_body and caught.value.raw_body.encode("utf-8")


def test_preview_never_raises():
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    assert "nested deeper" in preview(deep)
    assert preview({"a": float("nan"), "\ud800": {1, 2}}).encode("utf-8")


# -- the field helpers -------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [
    (INT64_MAX, INT64_MAX), (INT64_MIN, INT64_MIN), (2**63, None), (-(2**63) - 1, None), (2**64, None),
    (10**400, None), (float("inf"), None), (float("nan"), None), (1e300, None), (12.7, 12),
    ("12", 12), (" 12.7 ", 12), ("1e400", None), ("9" * 5000, None), ("NaN", None), (True, None), ([1], None),
    ({"a": 1}, None), ("", None), ("١٢", 12),
])
def test_as_int_fits_a_bigint_column(value, expected):
    assert as_int(value) == expected


def test_the_other_helpers_never_raise():
    assert as_float(10**400) is None and as_float("1e400") is None and as_float(float("-inf")) is None
    assert as_float("1.5") == 1.5 and as_float(True) is None
    assert as_size(-1) is None and as_size(2**64) is None and as_size("20") == 20
    assert as_str("\ud800x\x00") == "\ufffdx\ufffd" and as_str(float("nan")) is None and as_str(10**5000) is None
    assert as_str(12) == "12" and as_str({"a": 1}) is None and as_str("  ") is None
    assert from_unix(1e300) is None and from_unix(2**64) is None and from_unix(float("nan")) is None
    assert from_unix("1709294400") == datetime(2024, 3, 1, 12, tzinfo=timezone.utc)
    assert parse_iso("0001-01-01T00:00:00+01:00") is None and parse_iso("9999-12-31T23:59:59-01:00") is None
    assert parse_iso("2024-03-01T12:00:00+0000") == datetime(2024, 3, 1, 12, tzinfo=timezone.utc)
    assert as_list({"1": "b", "0": "a", "x": "c"}) == ["a", "b", "c"]
    assert https_on("http://[::1", ("x",)) == "http://[::1" and https_on("ftp://a.x/", ("x",)) == "ftp://a.x/"


def test_records_that_do_not_fit_the_ledger_fail_alone():
    ok = MediaRecord("urls", "a" * 64, "file", "image", "http://h/a", "http://h/a")
    bad = [
        MediaRecord("urls", "x" * 201, "file", "image", "http://h/a", "http://h/a"),
        MediaRecord("urls", "a", "file", "image", "http://h/\ud800", "http://h/a"),
        MediaRecord("urls", "a", "file", "image", "http://h/a", "http://h/a", expected_size=2**63),
        MediaRecord("urls", "a", "file", "image", "http://h/a", "http://h/a", meta={"duration": math.inf}),
        MediaRecord("urls", "a", "file", "image", "http://h/a", "http://h/a", meta={"title": "nul\x00"}),
    ]
    assert check_record(ok) is ok
    for record in bad:
        with pytest.raises(MissingField):
            check_record(record)
        [failure] = guarded("urls", "a", lambda record=record: [record])
        assert isinstance(failure, ItemError) and failure.error_class == "parse_error"


# -- `media-crawler normalize` on the crash signatures ------------------------------

SIGNATURES = {  # platform → saved answers that used to end in a traceback
    "bilibili": ['{"code": 0, "data": {"dash": {"video": [{"id": 1e400, "baseUrl": "https://a.bilivideo.com/x"}]}}}',
                 '{"code": Infinity, "data": {}}',
                 '{"code": 0, "data": {"list": {"vlist": [{"bvid": "BV1", "pic": "//i0.hdslb.com/a.jpg",'
                 ' "created": 18446744073709551616}]}}}',
                 '{"code": 0, "data": {"bvid": "BV1", "pic": "https://i0.hdslb.com/a.jpg", "pubdate": 1e300,'
                 ' "pages": [{"cid": 1, "duration": 9223372036854775808}]}}'],
    "weibo": ['{"ok": 1, "data": {"cards": [{"card_type": 9, "mblog": {"id": "1", "created_at": "99999999999天前",'
              ' "pics": [{"pid": "\\ud800", "url": "https://wx1.sinaimg.cn/orj360/\\udc00.jpg"}]}}]}}',
              '{"ok": 1, "statuses": [{"id": 1, "pic_num": 1e400}]}',
              '{"ok": 1, "data": {"cards": ' + "[" * 1200 + "]" * 1200 + "}}"],
    "facebook": ['{"data": [{"id": "1_2", "created_time": "0001-01-01T00:00:00+01:00", "attachments": {"data":'
                 ' [{"media_type": "video", "media": {"source": "https://video.xx.fbcdn.net/v.mp4"},'
                 ' "target": {"id": "9"}}]}}]}',
                 '{"error": {"code": 18446744073709551616, "message": "x"}}',
                 '{"id": "5", "source": "https://video.xx.fbcdn.net/\\ud800.mp4", "length": NaN}'],
    "urls": ['{"items": [{"url": "http://h/a.jpg", "size": 18446744073709551616, "published_at": 1e300}]}',
             '{"items": [{"url": "http://h/\\ud800.jpg", "title": "\\u0000"}]}',
             "[" * 5000 + "]" * 5000],
}


@pytest.mark.parametrize("platform", sorted(SIGNATURES))
def test_normalize_prints_classified_lines_for_every_crash_signature(platform, tmp_path):
    paths = []
    for index, text in enumerate(SIGNATURES[platform]):
        path = tmp_path / f"{index}.json"
        path.write_text(text, encoding="utf-8")
        paths.append(str(path))
    out, err = io.StringIO(), io.StringIO()
    status = run_normalize(platform, paths, out=out, err=err)
    assert status in (0, 1)
    lines = [json.loads(line) for line in (out.getvalue() + err.getvalue()).split("\n") if line]
    assert lines
    for line in lines:
        json.dumps(line, ensure_ascii=False).encode("utf-8")
        assert "error_class" not in line or line["error_class"] in {c.value for c in ErrorClass}


def test_normalize_text_reads_bytes_like_a_file():
    out, err = io.StringIO(), io.StringIO()
    assert normalize_text("urls", b'{"items": [{"url": "http://h/\xff.jpg"}]}', out, err) == 0
    assert json.loads(out.getvalue())["media_url"] == "http://h/\ufffd.jpg"


# -- malformed URL feeds: the fetch-urls path, down to the ledger ----------------------------

FEED = "http://127.0.0.1:9/urls/feed.json"
MALFORMED_FEEDS = [
    '{"items": [{"url": "http://h/a.jpg", "size": Infinity}]}',
    '{"items": [{"url": "http://h/a.jpg", "size": 1e400}]}',
    '{"items": [{"url": "http://h/a.jpg", "size": NaN}]}',
    '{"items": [{"url": "http://h/a.jpg", "size": 18446744073709551616}]}',
    '{"items": [{"url": "http://h/a.jpg", "size": 9223372036854775808}]}',
    '{"items": [{"url": "http://h/a.jpg", "size": -1}]}',
    '{"items": [{"url": "http://h/a.jpg", "size": "1e400"}]}',
    '{"items": [{"url": "http://h/a.jpg", "size": ' + "9" * 5000 + "}]}",
    "[" * 1000 + "]" * 1000,
    '{"items": [{"url": "http://h/a.jpg", "meta": ' + "[" * 300 + "]" * 300 + "}]}",
    '{"items": [{"url": "http://h/\\ud800.jpg"}]}',
    '{"items": [{"url": "http://h/a.jpg", "title": "\\udfff\\u0000"}]}',
    '{"items": [{"url": "http://h/a.jpg", "sha256": "' + "\\ud800" * 64 + '"}]}',
    '{"items": [{"url": "http://h/a.jpg", "published_at": "0001-01-01T00:00:00+01:00"}]}',
    '{"items": [{"url": "http://h/a.jpg", "published_at": 1e300}]}',
    '{"items": [{"url": "http://h/a.jpg", "published_at": 18446744073709551616}]}',
    '{"items": [{"url": "http://h/a.jpg", "date": "9999-12-31T23:59:59-01:00"}]}',
    '{"items": [{"url": "http://h/a.jpg"',
    '{"items": 5}',
    '{"items": [{"url": {"nested": "object"}}, null, 1, "x", []]}',
    '{"items": [], "items": [{"url": "http://h/dup.jpg"}]}',
    '\ufeff{"items": [{"url": "http://h/bom.jpg"}]}',
    '"just a string"',
    '{"items": [{"url": "   "}]}',
    '{"items": [{"url": "http://h/' + "a" * 10_000 + '.jpg"}]}',
    '{"items": [{"url": "\\\\\\\\evil\\\\share\\\\a.jpg"}, {"url": "javascript:alert(1)"}]}',
    '{"items": [], "next": "http://["}',
    '{"items": [], "next": "\\ud800"}',
    '{"items": [{"url": "a.jpg", "type": "\\ud800/x", "kind": 1e308}]}',
]


def test_malformed_url_feeds_end_in_records_item_errors_or_a_recorded_feed_error(tmp_path):
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    window = DayWindow(date(2026, 11, 26))
    feed_errors = 0
    for index, text in enumerate(MALFORMED_FEEDS):
        transport = CheckedTransport({"/urls/feed.json": [text]}, default='{"items": []}')
        source = parse_source("urls", f"{FEED}?n={index}")
        records, error = [], None
        try:
            for item in UrlsAdapter(PlatformSettings(), transport).iter_records(source, window):
                assert isinstance(item, (MediaRecord, ItemError)), item
                if isinstance(item, MediaRecord):
                    records.append(item)
        except CrawlError as caught:
            error = caught
        ledger.record_discovered(records, source_key=source.key, day=window.day.isoformat())  # what discover writes
        if error is not None:
            if "is not JSON" in error.message:  # the answer refused by the decoder is kept for whoever looks
                assert error.error_class == ErrorClass.PARSE_ERROR and error.raw_body
            ledger.record_feed_error(source_key=source.key, day=window.day.isoformat(), platform="urls",
                                     error=error, raw_body=getattr(error, "raw_body", None))
            feed_errors += 1
    assert feed_errors >= 9  # NaN, Infinity, 1e400, 5000 digits, 1000 deep, 300 deep, truncated, a string...


def test_identity_limits_are_the_ledger_columns():
    from media_crawler.platforms.items import IDENTITY_LIMITS
    from media_crawler.store import schema

    columns = {"item_id": "item_id", "variant": "variant", "group": "group_key", "resolve_ref": "resolve_ref"}
    assert {name: schema.tasks.c[column].type.length for name, column in columns.items()} == IDENTITY_LIMITS
    assert schema.feed_errors.c.platform_code.type.length == 32  # facebook/errors.py PLATFORM_CODE_LIMIT


def test_every_field_helper_takes_every_hostile_value():
    from media_crawler.platforms.fields import compact, dig, require
    from media_crawler.platforms.weibo.dates import parse_created_at

    from .test_normalizer_fuzz import CONTAINERS, FLOATS, HUGE_INTS, STRINGS

    deep: object = "x"
    for _ in range(150):
        deep = {"data": [deep]}
    values = [*HUGE_INTS, *FLOATS, *STRINGS, *CONTAINERS, None, True, False, deep, 10**5000, (1, 2), {1, 2}, b"\xff"]
    for value in values:
        for helper in (as_int, as_float, as_size, as_str, as_list, from_unix, parse_iso, parse_created_at):
            helper(value)
        dig(value, "data", 0, "data")
        compact(a=value)
        if isinstance(value, str):
            https_on(value, ("hdslb.com",))
        try:
            require(value, "x")
        except MissingField:
            pass
        text = as_str(value)
        assert text is None or text.encode("utf-8")
        number = as_int(value)
        assert number is None or INT64_MIN <= number <= INT64_MAX
        real = as_float(value)
        assert real is None or math.isfinite(real)

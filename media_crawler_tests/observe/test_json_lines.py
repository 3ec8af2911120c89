"""The JSON line format itself: fixed item keys, correlation ids, scrubbing of every field, late-bound stdout."""
import contextlib
import io
import json
import logging
import re
import time

import pytest

from media_crawler.observe.events import ITEM_KEYS, correlation, log_item, log_stages, one_line_for_stages
from media_crawler.observe.logging import JsonFormatter, configure, ensure_configured
from media_crawler.scrub import register_environment_secrets, scrub_text
from media_crawler_tests.observe.support import TS_PATTERN


@pytest.fixture
def captured():
    """The `media_crawler` loggers writing JSON to a buffer; restored afterwards."""
    logger = logging.getLogger("media_crawler")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    stream = io.StringIO()
    configure(stream=stream)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    logger.handlers[:], logger.level, logger.propagate = saved


def test_item_lines_have_every_key_even_outside_a_run(captured):
    log_item(stage="verify", platform="urls", canonical_url="http://example.org/a.jpg", outcome="ok")
    (line,) = captured()
    assert set(ITEM_KEYS) <= set(line) and {"ts", "level", "worker"} <= set(line)
    assert line["run_id"] is None and line["task_id"] is None and line["level"] == "info"
    assert "error_class" not in line and "bytes" not in line
    assert re.match(TS_PATTERN, line["ts"])


def test_one_line_for_several_stages_reads_as_the_last_stage_reached_and_keeps_each_outcome(captured):
    """fetch-urls' one line per item: a verify failure is a `verify failed` warning with its class."""
    item = {"platform": "urls", "canonical_url": "http://example.org/a.jpg", "task_id": 7}
    download = {**item, "stage": "download", "outcome": "ok", "attempt": 1, "duration_ms": 20.0, "bytes": 10,
                "bytes_received": 10, "resumed_from": None}
    verify = {**item, "stage": "verify", "outcome": "failed", "attempt": 2, "duration_ms": 1.25, "bytes": 10,
              "error_class": "bad_signature", "message": "not an image", "final_state": "discovered"}
    log_item(**one_line_for_stages([download, verify]))
    (line,) = captured()
    assert (line["stage"], line["outcome"], line["level"], line["error_class"]) == (
        "verify", "failed", "warning", "bad_signature")
    assert (line["download"], line["verify"], "commit" in line) == ("ok", "failed", False)
    assert (line["download_ms"], line["verify_ms"], line["duration_ms"]) == (20.0, 1.2, 21.2)
    assert line["attempt"] == 2 and line["bytes_received"] == 10 and "resumed_from" not in line


def test_failures_carry_their_class_at_warning_with_correlation_ids(captured):
    with correlation(run_id="r-1", partition="2026-11-27|urls-x", step="media_downloads"):
        log_item(stage="download", platform="urls", canonical_url="http://example.org/a.jpg", outcome="failed",
                 task_id=42, attempt=3, duration_ms=12.345, error_class="http_5xx", bytes=10, message="HTTP 500")
    (line,) = captured()
    assert line["level"] == "warning" and line["error_class"] == "http_5xx" and line["task_id"] == "t_42"
    assert (line["run_id"], line["partition"], line["step"]) == ("r-1", "2026-11-27|urls-x", "media_downloads")
    assert line["duration_ms"] == 12.3 and line["bytes"] == 10 and line["error_message"] == "HTTP 500"


def test_signed_urls_and_registered_secrets_are_scrubbed_in_every_field(captured, monkeypatch):
    monkeypatch.setenv("WEIBO_COOKIE", "SUB=_2AkMobsFakeSub77; SUBP=0033WrobsFakeSubp")
    register_environment_secrets()
    log_item(stage="download", platform="weibo", outcome="ok",
             canonical_url="https://m.weibo.cn/x.jpg?access_token=abc123secret&id=7",
             note="cookie _2AkMobsFakeSub77 seen")
    logging.getLogger("media_crawler.other").info("free text SUBP=0033WrobsFakeSubp",
                                                  extra={"url": "https://cdn.example/v.mp4?upsig=deadbeef01"})
    text = json.dumps(captured())
    for secret in ("abc123secret", "_2AkMobsFakeSub77", "0033WrobsFakeSubp", "deadbeef01"):
        assert secret not in text
    assert "id=7" in text  # ordinary parameters stay readable
    assert "0033WrobsFakeSubp" not in scrub_text("any text 0033WrobsFakeSubp")


def test_default_handler_writes_to_whatever_stdout_is_now():
    logger = logging.getLogger("media_crawler")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    logger.handlers[:] = []
    try:
        ensure_configured()
        first = logger.handlers[0]
        ensure_configured()  # idempotent: a command's own choice is never replaced
        assert logger.handlers == [first]
        redirected = io.StringIO()
        with contextlib.redirect_stdout(redirected):
            logging.getLogger("media_crawler.items").info("hello")
        assert json.loads(redirected.getvalue())["msg"] == "hello"
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved


def test_formatter_survives_values_json_cannot_encode():
    record = logging.LogRecord("dagster", logging.INFO, "", 0, "msg %s", ("x",), None)
    record.odd = object()
    record.dagster_meta = {"run_id": "r-9", "step_key": "media_records", "dagster_event": None}
    line = json.loads(JsonFormatter().format(record))
    assert line["run_id"] == "r-9" and line["step"] == "media_records" and line["msg"] == "msg x"
    assert "dagster_meta" not in line and line["odd"].startswith("<object")


def test_timestamps_match_datetime_to_the_millisecond():
    """The per-second cache must print what datetime would, rounding included."""
    import random
    from datetime import datetime, timezone

    from media_crawler.timestamps import utc_timestamp

    rng = random.Random(7)
    for epoch in [0.0, 1.9995, 1.9999996, 1764474000.9999, *(rng.uniform(0, 2e9) for _ in range(2000))]:
        moment = datetime.fromtimestamp(epoch, tz=timezone.utc)
        assert utc_timestamp(epoch) == moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def test_item_records_reach_caplog_and_skip_disabled_levels(caplog):
    with caplog.at_level(logging.INFO, logger="media_crawler.items"):
        log_item(stage="commit", platform="urls", canonical_url="http://example.org/a.jpg", outcome="ok")
    (record,) = [r for r in caplog.records if r.name == "media_crawler.items"]
    assert record.getMessage() == "commit ok" and record.stage == "commit"
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="media_crawler.items"):
        log_item(stage="commit", platform="urls", canonical_url="http://example.org/a.jpg", outcome="ok")
    assert not [r for r in caplog.records if r.name == "media_crawler.items"]


def test_secret_query_parameters_are_scrubbed_and_plain_urls_left_alone(captured):
    log_item(stage="download", platform="bilibili", canonical_url="https://cdn.example.org/v.mp4?upsig=abc&x=1",
             outcome="failed", message="GET https://u:pw@cdn.example.org/v.mp4?token=t0ps3cret failed")
    log_item(stage="download", platform="urls", canonical_url="http://example.org/plain/a.jpg", outcome="ok")
    failed, plain = captured()
    assert "abc" not in json.dumps(failed) and "t0ps3cret" not in json.dumps(failed) and "pw@" not in json.dumps(failed)
    assert failed["canonical_url"] == "https://cdn.example.org/v.mp4?x=1"
    assert plain["canonical_url"] == "http://example.org/plain/a.jpg"


def _item_line_shapes() -> list[dict]:
    """log_item calls of every shape: failures, secrets, renamed and odd fields, one line for three stages."""
    url = "http://example.org/a.jpg"
    item = {"platform": "urls", "canonical_url": url, "task_id": 7}
    download = {**item, "stage": "download", "outcome": "ok", "attempt": 1, "duration_ms": 20.0, "bytes": 10,
                "bytes_received": 10, "resumed_from": None}
    verify = {**item, "stage": "verify", "outcome": "ok", "attempt": 1, "duration_ms": 1.25, "bytes": 10}
    commit = {**item, "stage": "commit", "outcome": "ok", "attempt": 1, "sha256": "cd" * 32, "bytes": 10,
              "deduplicated": False, "duration_ms": 1.5}
    return [
        {"stage": "verify", "platform": "urls", "canonical_url": url, "outcome": "ok"},
        one_line_for_stages([download, verify, commit]),
        {"stage": "download", "platform": "weibo", "outcome": "failed", "task_id": 42, "attempt": 3,
         "canonical_url": "https://m.weibo.cn/x.jpg?access_token=abc123secret&id=7", "error_class": "http_5xx",
         "message": "GET https://u:pw@cdn.example.org/v.mp4?token=t0ps3cret: cookie _2AkMobsFakeSub77",
         "duration_ms": 12.345, "bytes": 10},
        {"stage": "download", "platform": "urls", "canonical_url": url, "outcome": "retry", "retry_in_s": 1.25,
         "name": "shadowed", "args": "a", "level": "overrides", "worker": "w", "exc": "e", "asctime": "a",
         "uni": "h\u00e9llo \u2603", "nan": float("nan"), "nested": {"a": [1, "b"]}, "odd": object},
        {"stage": "commit", "platform": "urls", "canonical_url": url, "outcome": "ok ", "reason": "SUBP=x"},
        {"stage": "x\nStack Trace:\n  File", "platform": "urls", "canonical_url": url, "outcome": "failed"},
    ]


@pytest.mark.parametrize("debug", ["", "1"])
def test_item_lines_written_without_a_record_are_those_a_record_makes(monkeypatch, debug):
    """With configure()'s handler alone, log_item writes its line straight to it (no LogRecord):
    byte for byte what the record path writes, ts, scrubbing and MEDIA_CRAWLER_DEBUG included."""
    monkeypatch.setenv("WEIBO_COOKIE", "SUB=_2AkMobsFakeSub77; SUBP=0033WrobsFakeSubp")
    monkeypatch.setenv("MEDIA_CRAWLER_DEBUG", debug)
    register_environment_secrets()
    logger = logging.getLogger("media_crawler")
    saved = (list(logger.handlers), logger.level, logger.propagate)

    def written(through_a_record: bool) -> str:
        clock = iter(1764474000.0 + step * 0.1234567 for step in range(1000))
        stream = io.StringIO()
        configure(stream=stream)
        if through_a_record:
            logger.handlers[0].addFilter(lambda record: True)  # any filter: only a record will do
        try:
            with monkeypatch.context() as patch:
                patch.setattr(time, "time", lambda: next(clock))
                with correlation(run_id="r-1", step="media_downloads"):
                    for fields in _item_line_shapes():
                        log_item(**fields)
                for fields in _item_line_shapes():
                    log_item(**fields)
        finally:
            logger.handlers[:], logger.level, logger.propagate = saved
        return stream.getvalue()

    direct = written(through_a_record=False)
    assert direct == written(through_a_record=True)
    assert direct.count("\n") == 12 and "_2AkMobsFakeSub77" not in direct and "abc123secret" not in direct
    messages = [json.loads(line)["msg"] for line in direct.splitlines()]
    assert ("x" in messages) == (debug != "1"), "the trace is cut from `msg` unless MEDIA_CRAWLER_DEBUG=1"


def test_the_line_for_several_stages_is_log_item_of_their_merged_fields(captured):
    """log_stages (fetch-urls' line per item) hands the merged fields over as a dict: the same
    line as log_item(**one_line_for_stages(...)), renamed, dropped and None fields included,
    whether the names were met before or not, straight to the handler or through a record."""
    url = "https://cdn.example.org/a.jpg?token=t0ps3cret&x=1"
    item = {"platform": "urls", "canonical_url": url, "task_id": 7}

    def shapes(odd: str) -> list[list[dict]]:
        download = {**item, "stage": "download", "outcome": "ok", "attempt": 1, "duration_ms": 20.0, "bytes": 10,
                    "bytes_received": 10, "resumed_from": None, odd: "first"}
        verify = {**item, "stage": "verify", "outcome": "failed", "attempt": 2, "duration_ms": 1.25, "bytes": None,
                  "error_class": "bad_signature", "message": "GET " + url, "final_state": "discovered"}
        commit = {**item, "stage": "commit", "outcome": "ok", "attempt": 1, "sha256": "cd" * 32, "bytes": 10,
                  "deduplicated": False, "duration_ms": 1.5, "args": "shadowed"}
        return [[download, verify], [download, verify, commit], [commit]]

    logger = logging.getLogger("media_crawler")
    for odd in ("never_seen_before_name", "never_seen_before_name", "_dropped_name"):
        for through_a_record in (False, True):
            if through_a_record:
                logger.handlers[0].addFilter(lambda record: True)  # any filter: only a record will do
            for lines in shapes(odd):
                log_item(**one_line_for_stages([dict(fields) for fields in lines]))
                log_stages([dict(fields) for fields in lines])
            logger.handlers[0].filters.clear()
    written = captured()
    assert len(written) == 36 and "t0ps3cret" not in json.dumps(written)
    for expected, line in zip(written[::2], written[1::2]):
        assert line == {**expected, "ts": line["ts"]}
    assert written[0]["error_message"] == "GET https://cdn.example.org/a.jpg?x=1" and written[0]["bytes"] == 10
    assert written[2]["field_args"] == "shadowed" and not any("_dropped_name" in line for line in written[-12:])
    assert written[-12]["download"] == "ok"


def test_item_lines_go_through_a_record_for_any_other_handler_or_a_field_the_formatter_drops(captured):
    logger = logging.getLogger("media_crawler")
    seen = []
    logger.handlers[0].addFilter(lambda record: seen.append(record.getMessage()) or True)
    log_item(stage="commit", platform="urls", canonical_url="http://example.org/a.jpg", outcome="ok")
    logger.handlers[0].filters.clear()
    with pytest.raises(KeyError), correlation(lineno=3):  # a record refuses it, whichever way the line went
        log_item(stage="commit", platform="urls", canonical_url="http://example.org/a.jpg", outcome="ok")
    log_item(stage="commit", platform="urls", canonical_url="http://example.org/a.jpg", outcome="ok", _kept_out=1)
    first, last = captured()
    assert seen == ["commit ok"] and first == {**last, "ts": first["ts"]} and "_kept_out" not in last


def test_the_encoder_built_once_writes_what_json_dumps_writes():
    from media_crawler.observe.logging import encode_line

    circular: dict = {"a": 1}
    circular["self"] = circular
    for data in [{"s": "h\u00e9llo \"q\" \\ \n\t\x01 \u2028 \ud800", "i": -10**20, "f": 0.1 + 0.2, "nan": float("nan"),
                  "inf": float("-inf"), "t": True, "n": None, "l": [1, (2, "3")], "d": {"k": {}}, "o": object,
                  "e": "", 7: "int key"}]:
        assert encode_line(data) == json.dumps(data, ensure_ascii=False, default=str)
    assert json.loads(encode_line({"c": circular}))["c"].startswith("{'a': 1")  # the fallback, as before

"""Progress events carry the item fields that apply (platform, partition, run_id, step) and the
log lag: from an event's time to its line written, measured per process."""
from __future__ import annotations

import io
import json
import logging
import time

from media_crawler.observe.batched_lines import BatchedLines
from media_crawler.observe.events import correlation
from media_crawler.observe.logging import LOG_LAG, JsonFormatter, MeasuredStreamHandler
from media_crawler.observe.progress import PROGRESS_KEYS, LogSink, Progress


def progress_events(run) -> list[dict]:
    stream = io.StringIO()
    logger = logging.getLogger("media_crawler_tests.progress_fields")
    handler = MeasuredStreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger.handlers[:], logger.propagate, logger.level = [handler], False, logging.INFO
    run(logger)
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_progress_lines_carry_platform_partition_run_and_step():
    def inside_a_step(logger):
        with correlation(run_id="r-1", partition="2026-11-27|weibo-678", step="media_downloads"):
            with Progress("download", total=2, sinks=[LogSink(stage="download", logger=logger, every_items=1)]) as p:
                p.advance()
                p.advance()

    events = progress_events(inside_a_step)
    assert len(events) == 3 and all(event["event"] == "progress" for event in events)
    for event in events:
        assert {key: event[key] for key in PROGRESS_KEYS} == {
            "platform": "weibo", "run_id": "r-1", "partition": "2026-11-27|weibo-678", "step": "media_downloads"}

    def outside(logger):  # fetch-urls: no Dagster step, a list of any platforms
        with Progress("download", total=1, sinks=[LogSink(stage="download", logger=logger)]) as p:
            p.advance()

    [event] = progress_events(outside)
    assert all(key in event and event[key] is None for key in PROGRESS_KEYS), event


def test_log_lag_is_measured_when_the_line_is_written_and_reported_on_progress_lines():
    LOG_LAG.take()
    stream = io.StringIO()
    handler = MeasuredStreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    record = logging.LogRecord("media_crawler.items", logging.INFO, __file__, 1, "late", (), None)
    record.created -= 1.5  # the event happened 1.5 s before its line could be written (a blocked stdout)
    handler.emit(record)
    lag = LOG_LAG.take()
    # At least the 1.5 s the event waited (a lower bound that time's direction guarantees).
    assert lag["writes"] == 1 and lag["max_ms"] >= 1500
    assert LOG_LAG.take() is None, "each take covers the lines since the previous one"

    def with_a_late_line(logger):
        handler.emit(record)
        with Progress("download", total=1, sinks=[LogSink(stage="download", logger=logger)]) as p:
            p.advance()

    [event] = progress_events(with_a_late_line)
    assert event["log_lag_ms"] >= 1500


def test_batched_lines_measure_the_wait_in_their_batch():
    LOG_LAG.take()
    target = io.StringIO()
    batched = BatchedLines(target, interval=0.3).start()
    handler = MeasuredStreamHandler(batched)
    handler.setFormatter(JsonFormatter())
    handler.emit(logging.LogRecord("media_crawler.items", logging.INFO, __file__, 1, "batched", (), None))
    assert LOG_LAG.take() is None, "not written yet: nothing measured at hand-over"
    time.sleep(0.5)
    batched.close()
    lag = LOG_LAG.take()
    assert target.getvalue().count("\n") == 1 and lag["writes"] == 1 and lag["max_ms"] >= 200


def test_dagster_step_progress_lines_name_their_platform(faulty_crawl):
    events = [record for record in faulty_crawl.records() if record.get("event") == "progress"]
    assert events
    for event in events:
        assert event["partition"] and event["run_id"] and event["step"] == "media_downloads", event
        assert event["platform"] == event["partition"].split("|")[1].split("-")[0], event

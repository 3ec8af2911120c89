"""Progress: a redrawn stderr line only on a terminal, periodic log events otherwise, stdout untouched (fake clock, no sleeps)."""
import io
import json
import logging

from media_crawler.observe.logging import JsonFormatter
from media_crawler.observe.progress import (
    LogSink,
    Progress,
    ProgressSnapshot,
    TerminalSink,
    clock_text,
    default_sinks,
    human_bytes,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_snapshot_describes_count_bytes_rate_and_eta():
    snapshot = ProgressSnapshot("download", "items", done=10, total=40, bytes=5_000_000, elapsed_s=5.0)
    assert snapshot.items_per_s == 2.0 and snapshot.bytes_per_s == 1_000_000
    assert snapshot.eta_s == 15.0
    assert snapshot.describe() == "download 10/40 items, 5.0 MB, 1.0 MB/s, ETA 0:15"
    unknown_total = ProgressSnapshot("crawl", "partitions", done=3, total=None, bytes=0, elapsed_s=2.0)
    assert unknown_total.eta_s is None and unknown_total.describe() == "crawl 3 partitions, 1.5 partitions/s"


def test_terminal_sink_redraws_one_line_at_most_five_times_a_second_and_ends_it():
    clock, terminal = FakeClock(), FakeTerminal()
    progress = Progress("download", total=3, sinks=[TerminalSink(terminal, clock=clock)], clock=clock)
    clock.now += 1
    progress.advance(bytes=1000)  # drawn
    progress.advance(bytes=1000)  # too soon: skipped
    clock.now += 1
    progress.advance(bytes=1000)  # drawn
    progress.close()  # drawn, with the newline that hands the terminal back
    text = terminal.getvalue()
    assert text.count("\r") == 3 and text.endswith("\n") and text.count("\n") == 1
    assert "download 3/3 items" in text.split("\r")[-1]


def test_no_terminal_line_unless_stderr_is_a_terminal(capsys):
    assert default_sinks(stream=io.StringIO()) == []
    assert [type(sink) for sink in default_sinks(stream=FakeTerminal())] == [TerminalSink]
    assert [type(sink) for sink in default_sinks(stream=io.StringIO(), log=True)] == [LogSink]
    progress = Progress("crawl", total=2, sinks=default_sinks())  # pytest's stderr is not a terminal
    progress.advance()
    progress.close()
    assert capsys.readouterr() == ("", "")  # and stdout, the JSON stream, is never written to


def test_log_sink_emits_every_n_items_or_every_interval_and_at_the_end():
    clock, stream = FakeClock(), io.StringIO()
    logger = logging.getLogger("media_crawler_tests.progress")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger.handlers[:], logger.propagate, logger.level = [handler], False, logging.INFO
    sink = LogSink(every_s=5.0, every_items=3, stage="download", logger=logger, clock=clock)
    with Progress("download", total=10, sinks=[sink], clock=clock) as progress:
        for _ in range(4):  # the third item is due by count
            progress.advance(bytes=10)
        clock.now += 6  # due by time
        progress.advance(bytes=10)
        progress.advance(bytes=10)  # neither
    events = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [event["items_done"] for event in events] == [3, 5, 6]
    assert [event["final"] for event in events] == [False, False, True]
    assert all(event["event"] == "progress" and event["stage"] == "download" for event in events)
    assert events[-1]["bytes"] == 60 and events[-1]["items_total"] == 10 and events[-1]["eta_s"] is not None


def test_human_units():
    assert human_bytes(999) == "999 B" and human_bytes(1_500_000) == "1.5 MB"
    assert clock_text(23) == "0:23" and clock_text(725) == "12:05" and clock_text(10931) == "3:02:11"

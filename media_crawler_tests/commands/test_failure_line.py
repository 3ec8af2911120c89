"""A failed command is one JSON line on stderr; MEDIA_CRAWLER_DEBUG=1 adds the traceback,
scrubbed as the message is (README: "never a traceback (MEDIA_CRAWLER_DEBUG=1 adds ...)")."""
from __future__ import annotations

import json

import pytest

from media_crawler.cli import DATA_EXIT, report_failure

TOKEN = "tok-" + "never-printed-" * 2  # built, so the traceback's source lines do not hold it


def fail_with_a_secret():
    url = f"https://graph.example.test/v1/feed?access_token={TOKEN}"
    raise RuntimeError(f"GET {url} failed")


def failure_line(capsys) -> dict:
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    return json.loads(err)


@pytest.mark.parametrize("debug", [None, "1"], ids=["plain", "debug"])
def test_the_failure_line_adds_the_scrubbed_traceback_only_when_debugging(debug, monkeypatch, capsys):
    if debug is None:
        monkeypatch.delenv("MEDIA_CRAWLER_DEBUG", raising=False)
    else:
        monkeypatch.setenv("MEDIA_CRAWLER_DEBUG", debug)
    try:
        fail_with_a_secret()
    except RuntimeError as exc:
        assert report_failure("export", exc) == DATA_EXIT
    line = failure_line(capsys)
    assert line["event"] == "command_failed" and line["error_class"] == "internal_error"
    assert TOKEN not in json.dumps(line) and "graph.example.test" in line["message"]
    if debug is None:
        assert "traceback" not in line
    else:
        assert line["traceback"].startswith("Traceback (most recent call last)")
        assert "in fail_with_a_secret" in line["traceback"] and "RuntimeError: GET https://graph.example.test" in line["traceback"]

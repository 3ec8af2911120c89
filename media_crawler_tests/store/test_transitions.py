"""Each ledger transition writes what its docstring says, read back from a real ledger row:
the failure's class, platform code, message (bounded) and time; the bad-bytes limit's exact
edge; when an item was verified, committed or handed back; what the media response said."""
from __future__ import annotations

import sqlite3

import pytest

from media_crawler import errors
from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.models import MediaRecord
from media_crawler.store.ledger import Ledger
from media_crawler.store.transitions import Committed, Downloaded, FailedAttempt, HandedBack, Verified


@pytest.fixture
def ledger_and_row(tmp_path):
    path = tmp_path / "ledger.db"
    ledger = Ledger(f"sqlite:///{path}")
    ledger.record_discovered([MediaRecord(platform="urls", item_id="id1", variant="file", kind="image",
                                          canonical_url="https://example.org/1",
                                          media_url="https://cdn.example.org/1.jpg")], source_key="s", day="d")
    task_id = ledger.tasks()[0].id

    def apply_and_read(transition, *names: str) -> tuple:
        ledger.apply([(task_id, None, transition)])
        with sqlite3.connect(path) as conn:
            return conn.execute(f"SELECT {', '.join(names)} FROM mc_tasks WHERE id = ?", (task_id,)).fetchone()

    return apply_and_read


def test_a_failed_attempt_records_class_platform_code_bounded_message_and_time(ledger_and_row):
    error = CrawlError(ErrorClass.RATE_LIMITED, "x" * 2500, platform_code=-412)
    state, code, message, cause, failed_at = ledger_and_row(
        FailedAttempt(error, 3, None, failed_at=1234.5), "state", "error_code", "error_message", "error_class",
        "failed_at")
    assert (state, code, cause, failed_at) == ("failed", "-412", "rate_limited", 1234.5)
    assert message == "x" * 2000


@pytest.mark.parametrize("attempts, state", [(errors.ATTEMPTS.after_bad_bytes - 1, "retry_wait"),
                                             (errors.ATTEMPTS.after_bad_bytes, "failed")])
def test_bad_bytes_are_retried_up_to_the_limit_and_not_once_more(attempts, state):
    failed = FailedAttempt.of_bad_bytes(CrawlError(ErrorClass.HASH_MISMATCH, "wrong bytes"), attempts)
    assert failed.state == state and (failed.retry_at is not None) == (state == "retry_wait")


def test_verified_committed_and_handed_back_record_when(ledger_and_row):
    assert ledger_and_row(Verified(verified_at=11.0), "state", "verified_at") == ("verified", 11.0)
    assert ledger_and_row(Committed(committed_at=12.0), "state", "committed_at") == ("committed", 12.0)
    halted = CrawlError(ErrorClass.AUTH, "login wall")
    assert ledger_and_row(HandedBack(halted, at=13.0), "state", "wait_reason", "wait_since", "wait_cause") == (
        "discovered", "platform_halted", 13.0, "auth")


def test_a_download_keeps_what_the_response_said_as_sorted_bounded_json(ledger_and_row):
    # The archive's response record is read from this column after compaction: one text per
    # response (keys sorted), numbers kept, and a hostile server's header cut to 300 characters.
    said = {"status": 200, "etag": '"v1"', "content_type": "image/jpeg", "date": "x" * 5000}
    downloaded = Downloaded(sha256="ab" * 32, size=3, etag='"v1"', started_at=1.0, attempts=1, response=said)
    state, media_response = ledger_and_row(downloaded, "state", "media_response")
    assert state == "downloaded"
    assert media_response == ('{"content_type": "image/jpeg", "date": "' + "x" * 300 + '", "etag": "\\"v1\\"", '
                              '"status": 200}')
    no_answer = Downloaded(sha256="ab" * 32, size=3, etag=None, started_at=1.0, attempts=1)
    assert ledger_and_row(no_answer, "media_response") == (None,)


@pytest.mark.parametrize("said", [
    {"status": 200, "content_type": "image/jpeg", "etag": '"abc"', "date": "Thu, 03 Dec 2026 20:00:00 GMT"},
    {"status": 200, "content_type": "text/html; charset=utf-8", "etag": "W/\"x\"", "location": "https://a.example/?token=t0ps3cret"},
    {"status": 200, "etag": "sessdata=abcdef123", "date": "y" * 301},
    {"status": True, "content_type": "image/png", "size": 12.5},
])
def test_what_the_response_said_is_stored_as_each_values_excerpt_whether_or_not_one_is_needed(said, monkeypatch):
    # _said skips the excerpts when every one would return its text: the stored JSON must be
    # the one the excerpts make, with no secret registered and with one (then they are all made).
    from media_crawler import scrub
    from media_crawler.store.transitions import _SORTED_JSON, _said

    def by_excerpts():
        return _SORTED_JSON({name: value if isinstance(value, int) else scrub.excerpt(str(value), 300)
                             for name, value in said.items()})

    monkeypatch.setattr(scrub, "_REGISTERED", ())
    assert _said(said) == by_excerpts()
    monkeypatch.setattr(scrub, "_REGISTERED", ("image/jpeg", "0:00 GMT-and-more", "t0ps3cret"))
    assert _said(said) == by_excerpts()
    assert "image/jpeg" not in _said(said) and "t0ps3cret" not in _said(said)

"""download_with_retries and RetryLoop: which classes retry, how long they wait, .part handling, re-resolution, budget hooks."""
from __future__ import annotations

import contextlib
import random

import pytest

from media_crawler.download.retry import RetryLoop, download_with_retries
from media_crawler.errors import CrawlError, ErrorClass
from media_crawler_tests.download.httpserver import Reply
from media_crawler_tests.download.support import ALLOWED, FAST, FakeClock, media_bytes, request_and_policy, sha256

SIZE = 600_000
HTML = b"<html><body>captcha</body></html>"


class RecordingBudget:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def acquire(self, platform: str) -> None:
        self.calls.append(("acquire", platform))

    def penalize(self, platform: str, factor: float = 0.5, seconds: float = 60.0) -> None:
        self.calls.append(("penalize", platform, seconds))

    @contextlib.contextmanager
    def slot(self, platform: str):
        self.calls.append(("slot", platform))
        yield


@pytest.fixture
def clock():
    return FakeClock()


def download(session, url, part, clock, **options):
    options.setdefault("max_bytes", 10 * SIZE)
    request, policy, rest = request_and_policy(
        url, part, url_policy=ALLOWED, timeouts=FAST, sleep=clock.sleep, rng=random.Random(7), **options
    )
    return download_with_retries(session, request, policy, **rest)


def test_retry_after_is_honoured(server, session, part, clock):
    body = media_bytes(SIZE)
    url = server.route("/busy.jpg", Reply(b"slow down", status=429, headers={"Retry-After": "7"}), Reply(body))

    result = download(session, url, part, clock)

    assert result.sha256 == sha256(body)
    assert len(clock.sleeps) == 1 and clock.sleeps[0] >= 7


def test_not_found_is_not_retried_and_leaves_no_part(server, session, part, clock):
    url = server.route("/gone.jpg", Reply(b"", status=404))
    reports = []

    with pytest.raises(CrawlError) as caught:
        download(session, url, part, clock, on_attempt=reports.append)

    assert caught.value.error_class is ErrorClass.NOT_FOUND
    assert len(server.requests_to("/gone.jpg")) == 1 and clock.sleeps == []
    assert [(r.attempt, r.delay_s) for r in reports] == [(1, None)]
    assert not part.exists()


def test_5xx_is_retried_with_backoff_until_it_succeeds(server, session, part, clock):
    body = media_bytes(SIZE)
    url = server.route("/flaky.jpg", Reply(b"", status=503), Reply(b"", status=502), Reply(body))
    reports = []

    result = download(session, url, part, clock, on_attempt=reports.append)

    assert result.sha256 == sha256(body)
    assert len(server.requests_to("/flaky.jpg")) == 3 and len(clock.sleeps) == 2
    assert [r.error.error_class if r.error else None for r in reports] == [ErrorClass.HTTP_5XX, ErrorClass.HTTP_5XX, None]


def test_repeated_cuts_resume_and_send_little_more_than_the_file(server, session, part, clock):
    body = media_bytes(SIZE)
    cuts = [Reply(body, etag='"v1"', cut_at=offset) for offset in (90_000, 260_000, 261_000, 599_999)]
    url = server.route("/v.mp4", *cuts, Reply(body, etag='"v1"'))

    result = download(session, url, part, clock)

    assert result.sha256 == sha256(body) and part.read_bytes() == body
    assert [r.status for r in server.requests_to("/v.mp4")] == [200, 206, 206, 206, 206]
    assert server.body_bytes_sent("/v.mp4") < 1.2 * SIZE


def test_a_bad_signature_retries_from_a_clean_part(server, session, part, clock):
    body = media_bytes(SIZE)
    url = server.route("/img.jpg", Reply(HTML, content_type="text/html", etag='"x"'), Reply(body, etag='"v1"'))

    result = download(session, url, part, clock)

    assert result.sha256 == sha256(body)
    assert "Range" not in server.requests_to("/img.jpg")[1].headers


def test_a_bad_signature_that_persists_fails_after_max_attempts(server, session, part, clock):
    url = server.route("/img.jpg", Reply(HTML, content_type="text/html"))

    with pytest.raises(CrawlError) as caught:
        download(session, url, part, clock, max_attempts=3)

    assert caught.value.error_class is ErrorClass.BAD_SIGNATURE
    assert len(server.requests_to("/img.jpg")) == 3 and not part.exists()


def test_an_expired_url_is_re_resolved_and_retried_at_once(server, session, part, clock):
    body = media_bytes(SIZE)
    expired = server.route("/old.mp4", Reply(b"expired", status=403))
    fresh = server.route("/new.mp4", Reply(body))
    resolved = []

    result = download(session, expired + "?deadline=1", part, clock, resolve=lambda: resolved.append(1) or fresh)

    assert result.sha256 == sha256(body) and resolved == [1] and clock.sleeps == []


def test_an_expired_url_without_a_resolver_is_final(server, session, part, clock):
    url = server.route("/old.mp4", Reply(b"expired", status=403))
    with pytest.raises(CrawlError) as caught:
        download(session, url, part, clock)
    assert caught.value.error_class is ErrorClass.URL_EXPIRED and len(server.requests_to("/old.mp4")) == 1


def test_exhausted_retries_keep_a_resumable_part_and_report_its_validator(server, session, part, clock):
    url = server.route("/v.mp4", Reply(media_bytes(SIZE), etag='"v1"', cut_at=1000))
    reports = []

    with pytest.raises(CrawlError) as caught:
        download(session, url, part, clock, max_attempts=2, on_attempt=reports.append)

    # The resumed attempt gets its 206 cut at the same offset: no new byte, a reset.
    assert caught.value.error_class is ErrorClass.CONNECTION_RESET
    assert part.stat().st_size == 1000 and reports[-1].validator == '"v1"'
    assert reports[-1].url.endswith("/v.mp4")


def test_the_budget_is_asked_before_each_request_and_slowed_by_429(server, session, part, clock):
    body = media_bytes(1000)
    url = server.route("/x.jpg", Reply(b"", status=429, headers={"Retry-After": "90"}), Reply(body))
    budget = RecordingBudget()

    download(session, url, part, clock, platform="bilibili", budget=budget)

    assert budget.calls == [
        ("slot", "bilibili"), ("acquire", "bilibili"), ("penalize", "bilibili", 90.0),
        ("slot", "bilibili"), ("acquire", "bilibili"),
    ]  # fmt: skip


def test_retry_loop_stops_after_max_attempts_with_one_wait_between_each():
    clock = FakeClock()
    calls = []

    def always_5xx():
        calls.append(1)
        raise CrawlError(ErrorClass.HTTP_5XX, "HTTP 503")

    with pytest.raises(CrawlError):
        RetryLoop(max_attempts=4, sleep=clock.sleep, rng=random.Random(1)).run(always_5xx)

    assert len(calls) == 4 and len(clock.sleeps) == 3
    assert all(0 < s <= 30 for s in clock.sleeps)


def test_retry_loop_raises_permanent_classes_at_once():
    clock = FakeClock()

    def disallowed():
        raise CrawlError(ErrorClass.DISALLOWED_URL, "no")

    with pytest.raises(CrawlError):
        RetryLoop(sleep=clock.sleep).run(disallowed)
    assert clock.sleeps == []

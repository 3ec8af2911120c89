"""A body cut mid-stream is resumed at once the first time (only the rest is asked for,
with Range/If-Range); a second cut of the same item waits as its error class says."""
from __future__ import annotations

import random

from media_crawler.download.request import DownloadPolicy, DownloadRequest
from media_crawler.download.retry import download_with_retries
from media_crawler_tests.download.httpserver import Reply
from media_crawler_tests.download.support import ALLOWED, FAST, FakeClock, media_bytes, sha256

SIZE = 600_000


def download(session, url, part, clock):
    policy = DownloadPolicy(max_bytes=10 * SIZE, url_policy=ALLOWED, timeouts=FAST, sleep=clock.sleep,
                            rng=random.Random(7))
    return download_with_retries(session, DownloadRequest(url, part), policy)


def test_the_first_cut_resumes_without_waiting_and_the_second_backs_off(server, session, part):
    body = media_bytes(SIZE)
    etag = '"v1"'
    url = server.route("/cut.jpg", Reply(body, etag=etag, cut_at=200_000), Reply(body, etag=etag, cut_at=400_000),
                       Reply(body, etag=etag))
    clock = FakeClock()

    result = download(session, url, part, clock)

    assert result.sha256 == sha256(body)
    requests = server.requests_to("/cut.jpg")
    assert len(requests) == 3
    assert requests[1].headers.get("Range") == "bytes=200000-" and requests[1].headers.get("If-Range") == etag
    assert requests[2].headers.get("Range") == "bytes=400000-"
    assert len(clock.sleeps) == 1 and clock.sleeps[0] > 0  # no wait before the first resume, one before the second

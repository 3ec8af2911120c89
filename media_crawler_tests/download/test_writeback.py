"""Early writeback: a .part's bytes are handed to the kernel for writing in steps while
the body arrives (resumed bodies from where they resume), each byte once, and the file
written is the same; durability is left to the fsync."""
from __future__ import annotations

import os
import sys

import pytest

from media_crawler.download import writeback
from media_crawler.download.fetcher import download_to_part
from media_crawler.download.request import DownloadPolicy, DownloadRequest
from media_crawler.errors import CrawlError
from media_crawler_tests.download.httpserver import Reply
from media_crawler_tests.download.support import ALLOWED, FAST, media_bytes, sha256

STEP = 64 * 1024
POLICY = DownloadPolicy(max_bytes=10**7, url_policy=ALLOWED, timeouts=FAST)


@pytest.fixture
def handed(monkeypatch):
    """The (offset, length) ranges handed to sync_file_range, and the step made small."""
    calls: list[tuple[int, int]] = []

    def record(fd, offset, length, flags):
        assert flags == writeback.SYNC_FILE_RANGE_WRITE  # start writing, never wait here
        calls.append((offset, length))
        return 0

    monkeypatch.setattr(writeback, "_SYNC_FILE_RANGE", record)
    monkeypatch.setattr(writeback, "WRITEBACK_STEP", STEP)
    return calls


def covered(calls):
    """The ranges are contiguous and each byte is handed once: return where they end."""
    end = calls[0][0]
    for offset, length in calls:
        assert offset == end and length >= STEP
        end += length
    return end


def test_a_body_is_handed_to_the_kernel_in_steps_as_it_arrives(server, session, part, handed):
    body = media_bytes(700_000)
    url = server.route("/v.mp4", Reply(body, etag='"v1"'))
    result = download_to_part(session, DownloadRequest(url, part), POLICY)

    assert part.read_bytes() == body and result.sha256 == sha256(body)
    assert handed[0][0] == 0
    assert len(body) - STEP < covered(handed) <= len(body)  # the rest is the fsync's


def test_a_resumed_body_is_handed_from_where_it_resumes(server, session, part, handed):
    body = media_bytes(700_000)
    url = server.route("/v.mp4", Reply(body, etag='"v1"', cut_at=300_000), Reply(body, etag='"v1"'))
    with pytest.raises(CrawlError):
        download_to_part(session, DownloadRequest(url, part), POLICY)
    handed.clear()

    result = download_to_part(session, DownloadRequest(url, part, validator='"v1"'), POLICY)
    assert result.resumed_from == 300_000 and part.read_bytes() == body
    assert handed[0][0] == 300_000 and covered(handed) <= len(body)


def test_a_file_smaller_than_a_step_is_left_to_its_fsync(tmp_path, handed):
    with open(tmp_path / "small.part", "wb", buffering=0) as handle:
        tracker = writeback.EarlyWriteback(handle.fileno(), 0)
        handle.write(b"x" * (STEP - 1))
        tracker.written_up_to(STEP - 1)
    assert handed == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sync_file_range is Linux's")
def test_the_real_call_is_found_and_accepted_on_linux(tmp_path):
    assert writeback.AVAILABLE
    path = tmp_path / "real.part"
    with open(path, "wb", buffering=0) as handle:
        tracker = writeback.EarlyWriteback(handle.fileno(), 0, step=STEP)
        handle.write(b"y" * (3 * STEP))
        tracker.written_up_to(3 * STEP)  # would raise through ctypes on a bad signature
        assert writeback._SYNC_FILE_RANGE(handle.fileno(), 0, 3 * STEP, writeback.SYNC_FILE_RANGE_WRITE) == 0
        os.fsync(handle.fileno())
    assert path.read_bytes() == b"y" * (3 * STEP)

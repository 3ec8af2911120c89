"""Shared constants and data builders for the download tests."""
from __future__ import annotations

import dataclasses
import hashlib
import random

from media_crawler.download.request import DownloadPolicy, DownloadRequest
from media_crawler.http import Timeouts
from media_crawler.net.policy import UrlPolicy

ALLOWED = UrlPolicy.from_entries(["127.0.0.1:*"])  # the test servers take any free port
FAST = Timeouts(connect=2.0, read=2.0, stall=2.0)
MB = 1024 * 1024


def request_and_policy(url, part, **options) -> tuple[DownloadRequest, DownloadPolicy, dict]:
    """The engine's request and policy from one set of keyword options, as the tests
    write them; the options neither takes (on_validator, on_attempt) come back as they are."""
    def taken(cls) -> dict:
        names = {field.name for field in dataclasses.fields(cls)}
        return {name: options.pop(name) for name in list(options) if name in names}

    request = DownloadRequest(url, part, **{name: value for name, value in taken(DownloadRequest).items()
                                            if name not in ("url", "part_path")})
    return request, DownloadPolicy(**taken(DownloadPolicy)), options


def media_bytes(size: int, seed: int = 1) -> bytes:
    """Incompressible bytes that open like a JPEG, so the first-chunk sniff accepts them."""
    rng = random.Random(seed)
    return b"\xff\xd8\xff\xe0" + rng.randbytes(size - 4)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class FakeClock:
    """time.time and time.sleep in one: sleeping advances the clock and is recorded."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += max(seconds, 0.0)

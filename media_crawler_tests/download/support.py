"""Shared constants and data builders for the download tests."""
from __future__ import annotations

import hashlib
import random

from media_crawler.http import Timeouts
from media_crawler.net.policy import UrlPolicy

ALLOWED = UrlPolicy.from_entries(["127.0.0.1:*"])  # the test servers take any free port
FAST = Timeouts(connect=2.0, read=2.0, stall=2.0)
MB = 1024 * 1024


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

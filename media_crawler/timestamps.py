"""Timestamps as text: one format for logs, reports and metadata."""
from __future__ import annotations

import time


def utc_timestamp(epoch: float) -> str:
    """ISO 8601, UTC, milliseconds, `Z`: sorts as text and parses everywhere."""
    seconds = int(epoch // 1)
    micros = round((epoch - seconds) * 1e6)  # rounded to the microsecond first, as datetime does
    if micros >= 1_000_000:
        seconds, micros = seconds + 1, micros - 1_000_000
    cached_seconds, text = _last_second  # (the cache's test inline: every log line asks)
    if cached_seconds != seconds:
        text = _utc_second(seconds)
    return text + _MILLISECONDS[micros // 1000]


# ".000Z" to ".999Z", the end of every timestamp: one look-up, not a format spec parsed per line.
_MILLISECONDS = tuple(f".{millis:03d}Z" for millis in range(1000))
_last_second: tuple[int, str] = (-1, "")


def _utc_second(seconds: int) -> str:
    """The text up to the second, reused while the second lasts (every log line asks)."""
    global _last_second
    cached_seconds, text = _last_second  # one tuple: threads see an old pair or a new one, never a mix
    if cached_seconds != seconds:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        _last_second = (seconds, text)
    return text

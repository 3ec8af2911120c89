"""HTTP plumbing shared by the downloader and the API transport (no session: sessions.py).

- `NO_RETRIES`: urllib3's own retries switched off, for both the API session and
  the media transport (sessions.py): every retry decision belongs to the error
  taxonomy (errors.py), so a failure is retried once, by us, with the class's
  backoff, not silently by urllib3 underneath and then again by us.
- `Timeouts`: connect, read (waiting for the response headers) and stall (the
  longest gap between two body chunks).
- `redact_url`, `parse_retry_after`: safe log text and Retry-After in seconds.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

from urllib3.util.retry import Retry

from media_crawler.scrub import excerpt

# total=0/read=False: urllib3 raises on the first failure and never
# re-sends a request on its own (see the module docstring).
NO_RETRIES = Retry(total=0, connect=0, read=False, redirect=False, status=0)


@dataclass(frozen=True)
class Timeouts:
    """Seconds. `stall` bounds the silence between body chunks, so a server that
    sends headers and then nothing is a network_timeout, not a hung worker."""

    connect: float = 5.0
    read: float = 30.0
    stall: float = 30.0


def redact_url(url: str) -> str:
    """scheme://host[:port]/path, without userinfo, query or fragment.

    Signed CDN URLs carry their signature and tokens in the query string, so
    this is the only form of a URL that may reach a log line or an error message.
    A URL too malformed to split (`http://[]`) is shown as its scheme alone.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return f"{excerpt(url.split(':', 1)[0], 16)}://(malformed)"
    try:
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        host, port = "(bad host)", ""
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}{port}{parts.path or '/'}"


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Retry-After as seconds from now: delta-seconds or an HTTP date; None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if moment is None:
        return None
    return max(moment.timestamp() - (time.time() if now is None else now), 0.0)

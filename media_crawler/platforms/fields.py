"""Tolerant field access for normalizers.

Platform responses change shape without notice: a number arrives as a
string, an object as null, a list as a dict. Optional fields go through these
helpers and degrade to None; mandatory ones go through `require`, whose
MissingField becomes a per-item parse_error (see items.py).

The helpers take anything a hostile answer holds and never raise: integers
outside a signed 64-bit column, NaN and infinities, timestamps past the
calendar, lone surrogates and NUL all degrade to None or are replaced.
"""
from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any, Mapping
from urllib.parse import urlsplit, urlunsplit

from media_crawler.platforms.safe_json import clean_text

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # what a BIGINT column (and SQLite's INTEGER) holds
_MAX_NUMBER_TEXT = 64  # longer digit strings are no count, size or time we store


class MissingField(ValueError):
    """A mandatory field (identity, media URL) is absent or empty."""


def dig(obj: Any, *path: str | int) -> Any:
    """obj[path[0]][path[1]]..., or None as soon as a step is missing."""
    for step in path:
        if isinstance(step, int) and isinstance(obj, list):
            obj = obj[step] if -len(obj) <= step < len(obj) else None
        elif isinstance(obj, Mapping):
            obj = obj.get(step)
        else:
            return None
        if obj is None:
            return None
    return obj


def require(value: Any, what: str) -> Any:
    if value is None or value == "" or value == [] or value == {}:
        raise MissingField(f"missing {what}")
    return value


def as_str(value: Any) -> str | None:
    """Ids arrive as numbers or strings; empty means absent. The text is valid
    UTF-8 (lone surrogates and NUL become U+FFFD)."""
    # A str first: it is most values, and the Mapping check below is an ABC's subclass
    # hook, the costliest line here at a dozen fields per item of a 5,000-item list.
    if not isinstance(value, str):
        if value is None or isinstance(value, (dict, list, tuple, set, bool)) or isinstance(value, Mapping):
            return None
        if isinstance(value, float) and not math.isfinite(value):
            return None
    try:
        text = value.strip() if isinstance(value, str) else str(value).strip()
    except (ValueError, TypeError):  # an int past Python's digit limit, an object whose str fails
        return None
    return clean_text(text) or None


def as_int(value: Any) -> int | None:
    """A whole number that fits a signed 64-bit column, else None (floats truncate)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, float):
        if not math.isfinite(value):
            return None
        number = int(value)
    elif isinstance(value, str):
        text = value.strip()
        if not text or len(text) > _MAX_NUMBER_TEXT:
            return None
        try:
            number = int(text)
        except ValueError:
            real = as_float(text)
            if real is None:
                return None
            number = int(real)
    else:
        return None
    return number if INT64_MIN <= number <= INT64_MAX else None


def as_size(value: Any) -> int | None:
    """A byte count: a whole number from 0 up (negative or out-of-range sizes are no size)."""
    size = as_int(value)
    return size if size is not None and size >= 0 else None


def as_float(value: Any) -> float | None:
    """A finite number, else None (NaN, infinities and overflowing values included)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        if len(value) > _MAX_NUMBER_TEXT:
            return None
    elif not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def as_list(value: Any) -> list:
    """Lists stay lists; {"0": a, "1": b} (seen on Weibo) becomes [a, b]; else []."""
    if isinstance(value, list):
        return value
    if isinstance(value, Mapping):
        return [value[key] for key in sorted(value, key=lambda k: (as_int(k) is None, as_int(k) or 0, str(k)))]
    return []


def from_unix(value: Any) -> datetime | None:
    seconds = as_float(value)
    if seconds is None or seconds <= 0:
        return None
    try:
        return datetime.fromtimestamp(seconds, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


def parse_iso(value: Any) -> datetime | None:
    """ISO 8601 incl. Graph API's `2024-03-01T12:00:00+0000`; naive means UTC;
    a moment that falls off the calendar in UTC (`0001-01-01T00:00+01:00`) is None."""
    text = as_str(value)
    if not text or len(text) > 64:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return moment.astimezone(timezone.utc)
    except (ValueError, OverflowError):
        return None


def https_on(url: str, host_suffixes: tuple[str, ...]) -> str:
    """`url` with `http:` (or no scheme, `//host/...`) upgraded to https when its
    host is one of the platform CDNs in `host_suffixes` (they serve both; https
    keeps the archive's fetches private). Any other URL is returned as served:
    a simulator or mirror on 127.0.0.1 speaks plain http."""
    if url.startswith("//"):
        url = "http:" + url
    if not url[:5].lower() == "http:":
        return url
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:  # a malformed host: the download refuses it as it is
        return url
    if host == "" or not any(host == suffix or host.endswith("." + suffix) for suffix in host_suffixes):
        return url
    return urlunsplit(("https", parts.netloc, parts.path, parts.query, parts.fragment))


def compact(**meta: Any) -> dict[str, Any]:
    """Meta without the fields the response did not have."""
    return {key: value for key, value in meta.items() if value is not None and value != ""}

"""Tolerant field access for normalizers.

Platform responses change shape without notice: a number arrives as a
string, an object as null, a list as a dict. Optional fields go through these
helpers and degrade to None; mandatory ones go through `require`, whose
MissingField becomes a per-item parse_error (see items.py).
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Mapping


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
    """Ids arrive as numbers or strings; empty means absent."""
    if value is None or isinstance(value, (dict, list, bool)):
        return None
    text = str(value).strip()
    return text or None


def as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return None


def as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


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
    """ISO 8601 incl. Graph API's `2024-03-01T12:00:00+0000`; naive means UTC."""
    text = as_str(value)
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def compact(**meta: Any) -> dict[str, Any]:
    """Meta without the fields the response did not have."""
    return {key: value for key, value in meta.items() if value is not None and value != ""}

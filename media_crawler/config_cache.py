"""A parsed copy of sources.yaml beside it, so that processes after the first skip YAML.

Why: every Dagster run worker is a fresh interpreter that loads the code location and
so parses sources.yaml; PyYAML (even its C loader) builds a Python node per scalar, 0.37 s
for 12,800 sources against 5 ms for the same data as JSON. That cost is paid again by
every run, and grows with the sources registered, not with the run's own work.

The copy works like Python's __pycache__: written beside the file by whoever parses it
first (`.<name>.parsed.json`), keyed by the SHA-256 of the whole text, so an edit of
any byte is a miss and the YAML is parsed again. It is only a cache:
- any doubt is a miss: unreadable, not ours, writable by others, a symbolic link, too
  big, another format or key;
- writing it is best effort (a read-only directory such as a mounted ConfigMap simply
  parses every time) and atomic (a temporary file renamed over it);
- only data JSON gives back exactly is cached (strings, whole numbers, finite floats,
  booleans, null, lists, string-keyed mappings, and days such as an unquoted
  `start_day: 2026-01-01`, written as {"!date": "2026-01-01"}): YAML's timestamps,
  non-string keys and binary stay with the YAML parse, which then runs every time;
- what it returns is checked by config_from_dict exactly as the YAML would be.
A copy can only say what the owner of sources.yaml could have written into it: it is
trusted only when that user owns it (and only that user's processes write one).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import tempfile
from datetime import date, datetime
from pathlib import Path
from typing import Any

FORMAT = 1  # bump when the copy's layout changes: older copies become misses
# Room for JSON's escapes and brackets over the YAML text; a copy bigger than this is refused.
SIZE_FACTOR, SIZE_SLACK = 4, 4096


def cache_path(config_path: Path) -> Path:
    return config_path.with_name(f".{config_path.name}.parsed.json")


def load_yaml(config_path: Path, text: str) -> Any:
    """sources.yaml's data: from the parsed copy when it matches `text`, else from YAML
    (then the copy is written). YAML errors propagate as yaml.YAMLError, as before."""
    import yaml

    # libyaml's safe loader when present: ~10x faster than the pure-Python one.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    # The parser is part of the key: another PyYAML or loader may read a value otherwise.
    digest = hashlib.sha256(f"{yaml.__version__} {loader.__name__}\n{text}".encode("utf-8", "surrogatepass")).hexdigest()
    copy = cache_path(config_path)
    try:
        config = os.stat(config_path)
    except OSError:
        config = None
    cached = _read(copy, config.st_uid, digest, text) if config is not None else _MISS
    if cached is not _MISS:
        return cached
    data = yaml.load(text, Loader=loader)
    encoded = _encode(data, budget=_values_budget(text))
    if encoded is not _MISS and config is not None and config.st_uid == os.getuid():  # anyone else's is ignored
        # Whoever may read sources.yaml may read its copy; only its owner may write it.
        _write(copy, digest, *encoded, mode=(config.st_mode & 0o444) | stat.S_IWUSR)
    return data


_MISS = object()


def _values_budget(text: str) -> int:
    # Without aliases every value or key takes at least one character of the text.
    return len(text) + 64


def _read(copy: Path, owner: int, digest: str, text: str) -> Any:
    limit = len(text) * SIZE_FACTOR + SIZE_SLACK
    try:
        # O_NONBLOCK: a FIFO planted at the copy's path would otherwise block the open until
        # a writer came; it opens at once and _trusted refuses it (not a regular file).
        fd = os.open(copy, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return _MISS
    try:
        info = os.fstat(fd)
        if not _trusted(info, owner) or info.st_size > limit:
            return _MISS
        with os.fdopen(fd, "rb", closefd=False) as stream:
            body = json.loads(stream.read(limit + 1), parse_constant=_refuse_constant,
                              parse_float=_finite_float)
    except (OSError, ValueError, RecursionError):
        return _MISS
    finally:
        os.close(fd)
    if not isinstance(body, dict) or body.get("format") != FORMAT or body.get("sha256") != digest or "data" not in body:
        return _MISS
    # Only a copy with days needs a walk: json.loads has refused NaN, Infinity and 1e400,
    # and the size limit bounds the rest.
    return _decode(body["data"], budget=_values_budget(text)) if body.get("dates") is True else body["data"]


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a value _encode writes")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400
        raise ValueError(f"{text} is not a value _encode writes")
    return value


def _trusted(info: os.stat_result, owner: int) -> bool:
    """A regular file of sources.yaml's owner that no one else may write. Not "of this
    process's user": a service reading an operator's read-only sources.yaml could then
    be made to obey a copy written by anything running as the service."""
    return (stat.S_ISREG(info.st_mode) and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
            and info.st_uid == owner)


def _write(copy: Path, digest: str, data: Any, dates: bool, mode: int) -> None:
    try:
        body = json.dumps({"format": FORMAT, "sha256": digest, "dates": dates, "data": data}, ensure_ascii=False,
                          allow_nan=False, separators=(",", ":")).encode("utf-8")
    except (ValueError, RecursionError):  # an int past str()'s 4,300 digits; a surrogate (pure-Python loader)
        return
    try:
        fd, temporary = tempfile.mkstemp(prefix=copy.name + ".", suffix=".tmp", dir=copy.parent)
    except OSError:
        return  # a directory we may not write: parse every time
    try:
        with os.fdopen(fd, "wb") as stream:
            os.fchmod(stream.fileno(), mode)
            stream.write(body)
        os.replace(temporary, copy)
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass


DATE_TAG = "!date"  # a mapping of this one key stands for a day; no sources.yaml key starts with "!"


def _encode(value: Any, budget: int) -> Any:
    """(`value` as JSON gives it back exactly, days tagged; whether it holds days), or _MISS
    when it cannot be, or when it holds more than `budget` values. The budget stops YAML aliases: `&a [x, x]`, `[*a, *a]`,
    ... nest to 2^n values in a few lines (and to cycles), which neither the walk nor the
    copy may follow; such a file is parsed from its YAML every time, as before."""
    counter, dates = [budget], []

    def walk(item: Any) -> Any:
        counter[0] -= 1
        if counter[0] < 0:
            raise _NotCopied
        if item is None or isinstance(item, (str, bool, int)):
            return item
        if isinstance(item, float):
            if not math.isfinite(item):
                raise _NotCopied
            return item
        if isinstance(item, datetime):  # a timestamp: its zone would not come back as it was
            raise _NotCopied
        if isinstance(item, date):
            dates.append(item)
            return {DATE_TAG: item.isoformat()}
        if isinstance(item, list):
            return [walk(member) for member in item]
        if isinstance(item, dict):
            if not all(isinstance(key, str) for key in item) or DATE_TAG in item:
                raise _NotCopied
            return {key: walk(member) for key, member in item.items()}
        raise _NotCopied

    try:
        return walk(value), bool(dates)
    except (_NotCopied, RecursionError):
        return _MISS


def _decode(value: Any, budget: int) -> Any:
    """What _encode wrote, back as the YAML gave it; _MISS for anything it would not write."""
    counter = [budget]

    def walk(item: Any) -> Any:
        counter[0] -= 1
        if counter[0] < 0:
            raise _NotCopied
        if isinstance(item, list):
            return [walk(member) for member in item]
        if isinstance(item, dict):
            if DATE_TAG in item:
                if len(item) != 1 or not isinstance(item[DATE_TAG], str):
                    raise _NotCopied
                try:
                    return date.fromisoformat(item[DATE_TAG])
                except ValueError:
                    raise _NotCopied from None
            return {key: walk(member) for key, member in item.items()}
        return item

    try:
        return walk(value)
    except (_NotCopied, RecursionError):
        return _MISS


class _NotCopied(Exception):
    pass

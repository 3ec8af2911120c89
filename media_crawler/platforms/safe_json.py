"""The one JSON decoder for platform answers, saved responses and URL feeds.

`json.loads` takes more than the pipeline can store or walk:
- `NaN`, `Infinity`, `-Infinity` (not JSON at all) and numbers that overflow a
  double (`1e400`, which Python reads as inf) are refused;
- nesting deeper than MAX_DEPTH is refused before the parser recurses (a
  thousand `[` used to escape as RecursionError);
- lone surrogates (`"\\ud800"`) and NUL characters, which no UTF-8 encoder and
  no PostgreSQL text column accepts, become U+FFFD.
Integers are kept exactly as written (ids may be big); the field helpers
(fields.py `as_int`) range-check every number that becomes a column.

Every refusal is a JsonRefused (a ValueError): callers turn it into the
platform's parse_error with the raw body kept, as for any other non-JSON answer.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any, Iterable

from media_crawler.scrub import excerpt

MAX_DEPTH = 200  # API answers nest about ten levels; 200 leaves room and keeps every walker off the recursion limit
MAX_NODES = 5_000_000  # a walk never loops on a (non-JSON) self-referencing object
REPLACEMENT = "\ufffd"

# Characters a UTF-8 encoder (lone surrogates) or a PostgreSQL text column (NUL) refuses.
_UNSAFE_CHARS = re.compile("[\ud800-\udfff\x00]")
# Their JSON escapes: `\ud800`..`\udfff` (a valid pair becomes one character when decoded) and `\u0000`.
_UNSAFE_ESCAPES = re.compile(r"\\u(?:[dD][89a-fA-F][0-9a-fA-F]{2}|0000)")
# Depth is counted on the brackets alone: escapes that could hide a quote dropped, every
# byte but `"[]{}` deleted (UTF-8 sequences hold no ASCII byte), then the strings removed.
_NOT_QUOTE_OR_BRACKET = bytes(sorted(set(range(256)) - set(b'"[]{}')))
_STRING = re.compile(rb'"[^"]*"')
_INNERMOST = re.compile(rb"\[\]|\{\}")
_OPENER_RUN = re.compile(rb"[\[{]{%d}" % (MAX_DEPTH + 1))  # that many openers in a row: too deep at once


class JsonRefused(ValueError):
    """Text that is not JSON the crawler accepts (see the module docstring)."""


def loads(text: str | bytes | bytearray) -> Any:
    """The decoded value of `text`, or JsonRefused / ValueError.

    Bytes are read as UTF-8 (a BOM is dropped, invalid sequences become U+FFFD).
    """
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8-sig", "replace")
    if not isinstance(text, str):
        raise JsonRefused(f"expected text, got {type(text).__name__}")
    if text.startswith("\ufeff"):
        text = text[1:]
    check_text_depth(text)
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError:  # the check above bounds depth; this is the floor under it
        raise JsonRefused(f"JSON nested too deep (more than {MAX_DEPTH} levels)") from None
    if not is_clean(text) or (_maybe_unsafe_escape(text) and _UNSAFE_ESCAPES.search(text)):
        value = clean_value(value)
    return value


def _maybe_unsafe_escape(text: str) -> bool:
    """A quick substring test before the regular expression (most answers have no `\\ud…`)."""
    return "\\ud" in text or "\\uD" in text or "\\u0000" in text


def check_text_depth(text: str) -> None:
    """JsonRefused when the brackets of `text` (outside strings) nest past MAX_DEPTH.

    Each pass removes every innermost `[]`/`{}` pair, in C: as many passes as the
    text is deep, at most MAX_DEPTH, whatever its size; a run of more than
    MAX_DEPTH openers (`[[[[…`) is refused before any pass.
    """
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    raw = text.encode("utf-8", "surrogatepass")
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = _STRING.sub(b"", raw.translate(None, _NOT_QUOTE_OR_BRACKET))
    for _ in range(MAX_DEPTH):
        if _OPENER_RUN.search(brackets):
            break
        reduced = _INNERMOST.sub(b"", brackets)
        if reduced == brackets or not reduced:
            return
        brackets = reduced
    if _INNERMOST.search(brackets) or _OPENER_RUN.search(brackets):
        raise JsonRefused(f"JSON nested deeper than {MAX_DEPTH} levels")


def is_clean(text: str) -> bool:
    """True when `text` holds no lone surrogate and no NUL."""
    return (text.isascii() and "\x00" not in text) or not _UNSAFE_CHARS.search(text)


def clean_text(text: str) -> str:
    """`text` with lone surrogates and NUL replaced by U+FFFD: valid UTF-8, storable."""
    return text if is_clean(text) else _UNSAFE_CHARS.sub(REPLACEMENT, text)


def clean_value(value: Any) -> Any:
    """A decoded value with every string (keys too) through clean_text; iterative."""
    if isinstance(value, str):
        return clean_text(value)
    stack = [value]
    budget = MAX_NODES
    while stack and budget > 0:
        node = stack.pop()
        budget -= 1
        if isinstance(node, list):
            for index, item in enumerate(node):
                if isinstance(item, str):
                    node[index] = clean_text(item)
                elif isinstance(item, (list, dict)):
                    stack.append(item)
        elif isinstance(node, dict):
            if any(isinstance(key, str) and _UNSAFE_CHARS.search(key) for key in node):
                pairs = list(node.items())
                node.clear()
                node.update((clean_text(k) if isinstance(k, str) else k, v) for k, v in pairs)
            for key, item in node.items():
                if isinstance(item, str):
                    node[key] = clean_text(item)
                elif isinstance(item, (list, dict)):
                    stack.append(item)
    return value


def depth_exceeds(value: Any, limit: int = MAX_DEPTH) -> bool:
    """True when containers nest deeper than `limit` in `value` (iterative, bounded)."""
    stack = [(value, 1)]
    budget = MAX_NODES
    while stack and budget > 0:
        node, depth = stack.pop()
        budget -= 1
        if isinstance(node, (list, tuple, dict)):
            if depth > limit:
                return True
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children if isinstance(child, (list, tuple, dict)))
    return bool(stack)  # budget spent: treat as too deep (only a non-JSON object gets here)


def preview(value: Any, limit: int = 4096, secrets: Iterable[str] = ()) -> str:
    """A readable, storable prefix of `value` for a parse_error's raw body: JSON
    when it serializes, else repr; never raises (deep or odd objects included).
    Scrubbed (with `secrets` too) before it is cut: scrub.excerpt."""
    if isinstance(value, str):
        return clean_text(excerpt(value, limit, secrets))
    if depth_exceeds(value):
        return f"<{type(value).__name__} nested deeper than {MAX_DEPTH} levels>"
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        try:
            text = repr(value)
        except (ValueError, RecursionError):  # pragma: no cover - a repr that fails
            text = f"<unprintable {type(value).__name__}>"
    return clean_text(excerpt(text, limit, secrets))


def _refuse_constant(name: str) -> Any:
    raise JsonRefused(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonRefused(f"number {excerpt(text, 40)} overflows a double")
    return value

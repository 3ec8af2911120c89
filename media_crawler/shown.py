"""A value from a file we did not write, as a short repr fit for a one-line error.

Why not `repr()`: sources.yaml is hostile input, and YAML aliases nest a few lines into
billions of values (`&a [x, x]`, `[*a, *a]`, ...) or into a cycle; `repr()` of that
never returns. reprlib stops at a few levels and items, and long strings are cut:
a string is scrubbed before (scrub.py: a cut secret is no longer recognized), the
whole repr cut by scrub.excerpt.
"""
from __future__ import annotations

import reprlib
from typing import Any, Iterable

from media_crawler.scrub import excerpt, scrub_text


class _ScrubbedRepr(reprlib.Repr):
    def repr_str(self, x: str, level: int) -> str:
        return super().repr_str(scrub_text(x), level)  # scrubbed whole, then reprlib cuts it


_REPR = _ScrubbedRepr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple, _REPR.maxdict, _REPR.maxset = 2, 4, 4, 4, 4
_REPR.maxstring, _REPR.maxother, _REPR.maxlong = 80, 80, 40
LIMIT = 200  # characters of the whole repr


def shown_some(values: Iterable[Any], limit: int = 5) -> str:
    """The first `limit` of `values`, each shown(), sorted, then how many more: a list of
    unknown keys or repeated sources from a hostile file may be 100,000 long."""
    names = sorted(shown(value) for value in values)
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def shown(value: Any) -> str:
    try:
        text = _REPR.repr(value)
    except ValueError:  # an int past Python's 4,300-digit limit for str(), e.g. YAML's 0xfff...
        return f"<a number of {value.bit_length()} bits>" if isinstance(value, int) else "<unprintable>"
    return scrub_text(text) if len(text) <= LIMIT else excerpt(text, LIMIT - 3) + "..."


def clipped(text: str, limit: int = 160) -> str:
    """`text` scrubbed, then cut to `limit` characters in its middle: a reason's start says
    what failed and its end often why ("... from http://cdn/x: ConnectionRefusedError"),
    so both stay. Each part goes through scrub.excerpt, so neither ends in a secret's start."""
    text = scrub_text(text)
    if len(text) <= limit:
        return excerpt(text, limit)
    marker = " ... "
    head = (limit - len(marker) + 1) // 2
    tail = limit - len(marker) - head
    return excerpt(text, head) + marker + (excerpt(text[-tail:], tail) if tail > 0 else "")

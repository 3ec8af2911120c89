"""Which network failure a connection attempt's exception is, whoever wrapped it.

requests wraps urllib3, which wraps the socket's error (MaxRetryError ->
NewConnectionError -> ConnectionRefusedError); each layer keeps the one below as
`reason`, `__cause__` or `__context__`, or only as an argument. A refusal
(ECONNREFUSED: nothing listens there, or a firewall says no) is its own class,
connection_refused: "the server is not there" reads differently from "it hung up".
"""
from __future__ import annotations

import errno

from media_crawler.errors import ErrorClass

_REFUSED_ERRNOS = frozenset({errno.ECONNREFUSED})
_DEPTH = 8  # wrappers seen in practice: three or four; a cycle must still end


def is_refused(exc: BaseException | None) -> bool:
    """Whether `exc` or anything it wraps is a refused connection."""
    seen: set[int] = set()
    pending = [exc]
    while pending and len(seen) < _DEPTH * 4:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError) or getattr(current, "errno", None) in _REFUSED_ERRNOS:
            return True
        pending.extend(getattr(current, name, None) for name in ("reason", "__cause__", "__context__"))
        pending.extend(arg for arg in getattr(current, "args", ())[:_DEPTH] if isinstance(arg, BaseException))
    return False


def dropped_connection_class(exc: BaseException) -> ErrorClass:
    """connection_refused for a refusal, else connection_reset (the connection failed or dropped)."""
    return ErrorClass.CONNECTION_REFUSED if is_refused(exc) else ErrorClass.CONNECTION_RESET

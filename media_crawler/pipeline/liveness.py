"""Which process holds a lease or runs a Dagster run, and is it still alive?

A process is named by a token `host/pid/start`: the host name, the pid and the
process's start time (Linux clock ticks since boot, from /proc). The start time
makes a recycled pid harmless: a new process with the same pid has another
start time, so the token still reads as dead.

Liveness is only ever decided on the host that wrote the token. From another
host the answer is "unknown", and callers fall back to what needs no guessing:
lease expiry, and Dagster's run monitoring (max_runtime_seconds).
"""
from __future__ import annotations

import os
import socket
import uuid
from functools import lru_cache
from pathlib import Path

# Lease owners live in a String(120) column: keep the host part bounded.
_HOST_CHARS = 60


@lru_cache(maxsize=1)
def _host() -> str:
    return socket.gethostname()[:_HOST_CHARS].replace("/", "_").replace(":", "_")


def _start_ticks(pid: int) -> tuple[str, str] | None:
    """(state, start time) of a process from /proc, or None when it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    except OSError:
        return ("?", "")
    # The command name (field 2) may contain spaces and parentheses: split after its last ')'.
    fields = stat.rsplit(")", 1)[1].split()
    return fields[0], fields[19]  # field 3 is the state, field 22 the start time


def process_token(pid: int | None = None) -> str:
    """`host/pid/start` of this process (or of `pid`, on this host)."""
    pid = os.getpid() if pid is None else pid
    info = _start_ticks(pid) if Path("/proc").is_dir() else None
    return f"{_host()}/{pid}/{info[1] if info else ''}"


def lease_owner(run_id: str | None) -> str:
    """A lease owner for one stage call: the process token, the run, and a nonce
    (two stage calls in one process must not share leases)."""
    return f"{process_token()}:{(run_id or 'local')[:8]}:{uuid.uuid4().hex[:8]}"


def token_of_owner(owner: str) -> str:
    """The process token inside a lease owner (the part before the first ':')."""
    return owner.split(":", 1)[0]


def is_dead(token: str | None) -> bool | None:
    """True when the process named by `token` is gone; False when it runs;
    None when this host cannot tell (another host, or not a token)."""
    if not token:
        return None
    parts = token.split("/")
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    host, pid, start = parts[0], int(parts[1]), parts[2]
    if host != _host():
        return None
    if not Path("/proc").is_dir():
        return _dead_by_signal(pid)
    info = _start_ticks(pid)
    if info is None:
        return True
    state, now_start = info
    if state in ("Z", "X"):  # killed, not yet reaped by its parent
        return True
    return bool(start) and bool(now_start) and start != now_start


def _dead_by_signal(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # it exists, under another user
    return False

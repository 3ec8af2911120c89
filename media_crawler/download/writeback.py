"""Start writing a .part to disk while the rest of its body is still arriving.

Every .part is fsynced before it is linked into the store. Left to itself the
kernel begins writing a file back only when the fsync asks (or when dirty
memory piles up), so a 50 MB video would be received at network speed and then
wait, idle, for 50 MB of disk writes; eight such downloads started together
(the largest go first) all wait for the disk at the same moment. Asking the
kernel to write each few MB as soon as they are written keeps the disk busy
during the download, and the final fsync finds little left to do. Nothing is
waited for here: durability still comes from the fsync alone.

Linux has the call for it, sync_file_range(SYNC_FILE_RANGE_WRITE), which the
standard library does not wrap (PostgreSQL uses it the same way for its
`*_flush_after` settings); elsewhere this does nothing.
"""
from __future__ import annotations

import ctypes
import sys

# Hand the kernel the bytes of a .part every this many bytes; smaller files
# (most images) are left to their fsync, which writes them in one go. Measured
# on the benchmark's main set (2 cores): 1 MiB steps took 3.50-3.73 s, 4 MiB
# 3.89-3.92 s, 16 MiB 4.04 s, none 4.18 s (medians of 5-7 runs).
WRITEBACK_STEP = 1024 * 1024
SYNC_FILE_RANGE_WRITE = 2


def _sync_file_range():
    if not sys.platform.startswith("linux"):
        return None
    try:
        # The running process's own symbols (libc is loaded): no library search, which
        # would run `ldconfig -p` in a subprocess on every start.
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    function.restype = ctypes.c_int
    return function


_SYNC_FILE_RANGE = _sync_file_range()
AVAILABLE = _SYNC_FILE_RANGE is not None


class EarlyWriteback:
    """Tracks how far one open .part has been handed to the kernel for writing."""

    __slots__ = ("_fd", "_handed", "_step")

    def __init__(self, fd: int, start: int, step: int | None = None) -> None:
        self._fd, self._handed, self._step = fd, start, step or WRITEBACK_STEP

    def written_up_to(self, end: int) -> None:
        """The file now holds bytes up to `end`: start writing them once a step has gathered."""
        if _SYNC_FILE_RANGE is None or end - self._handed < self._step:
            return
        # A failure here (ENOSPC is reported by write and fsync, not by this) only
        # means the fsync will do all of the writing, as without this class.
        _SYNC_FILE_RANGE(self._fd, self._handed, end - self._handed, SYNC_FILE_RANGE_WRITE)
        self._handed = end

"""Free bytes on the disk under a folder, read at most every FREE_SPACE_TTL_S: a statfs
per file would be a system call per item at thousands of items a second, and the disk
guard keeps a margin anyway."""
from __future__ import annotations

import shutil
import time
from pathlib import Path

FREE_SPACE_TTL_S = 0.5


class FreeSpace:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._reading: tuple[float, int] = (float("-inf"), 0)  # (read at, bytes free)

    def bytes(self) -> int:
        now = time.monotonic()
        read_at, free = self._reading
        if now - read_at >= FREE_SPACE_TTL_S:
            # A store not made yet: its parent's disk is where it will be.
            free = shutil.disk_usage(self.folder if self.folder.exists() else self.folder.parent).free
            self._reading = (now, free)
        return free

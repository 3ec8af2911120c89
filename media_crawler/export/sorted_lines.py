"""Lines sorted on disk: the CDXJ index must be sorted by its URL key, and an export of
10^6 items must not hold 10^6 lines in memory. Lines are kept in runs of RUN_LINES,
each sorted and spilled to a temporary file, then merged (heapq.merge reads one line of
each run at a time). Sorting is by the line's UTF-8 bytes, as `LC_ALL=C sort` and the
binary search of a replay tool compare them.
"""
from __future__ import annotations

import heapq
import os
import tempfile
from pathlib import Path
from typing import Iterator

RUN_LINES = 10_000  # about 4 MB of index lines held at most


class SortedLines:
    def __init__(self, folder: str | os.PathLike, *, run_lines: int = RUN_LINES) -> None:
        self.folder = Path(folder)
        self.run_lines = run_lines
        self._pending: list[bytes] = []
        self._runs: list[Path] = []

    def add(self, line: str) -> None:
        self._pending.append(line.encode("utf-8") + b"\n")
        if len(self._pending) >= self.run_lines:
            self._spill()

    def _spill(self) -> None:
        handle, name = tempfile.mkstemp(dir=self.folder, prefix="run-", suffix=".lines")
        with os.fdopen(handle, "wb") as run:
            run.writelines(sorted(self._pending))
        self._runs.append(Path(name))
        self._pending = []

    def lines(self) -> Iterator[bytes]:
        """Every line added, sorted, with its newline."""
        files = [open(path, "rb") for path in self._runs]
        try:
            yield from heapq.merge(*files, sorted(self._pending))
        finally:
            for run in files:
                run.close()
            for path in self._runs:
                path.unlink(missing_ok=True)

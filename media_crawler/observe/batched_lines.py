"""fetch-urls' item log stream when stdout is a file or a pipe: batched writes,
and whole lines even when several processes share the stream."""
from __future__ import annotations

import threading
import time
from typing import IO

from media_crawler.observe.logging import LOG_LAG


class ProcessWriteLock:
    """One writer at a time on a stream that forked processes share.

    A POSIX record lock (fcntl.lockf) on an unlinked temporary file, made
    before the fork. Record locks belong to a process, not to a file
    descriptor, so the descriptor each child inherits is all it needs; and the
    kernel drops the lock of a process that dies, even by SIGKILL, so a killed
    shard never stops the others' logs. Threads of one process do not exclude
    each other through it: in each process only the flusher thread writes.
    (The kernel keeps a pipe write whole only up to PIPE_BUF, 4 KiB, and an
    item line with a long URL or error message can be longer.)
    """

    def __init__(self) -> None:
        # Imported here: POSIX only, like the fork that needs this lock, and this
        # module is fetch-urls' on every platform.
        import fcntl
        import tempfile

        self._file = tempfile.TemporaryFile()
        self._lockf, self._exclusive, self._unlock = fcntl.lockf, fcntl.LOCK_EX, fcntl.LOCK_UN

    def __enter__(self) -> "ProcessWriteLock":
        self._lockf(self._file.fileno(), self._exclusive)
        return self

    def __exit__(self, *_exc) -> None:
        self._lockf(self._file.fileno(), self._unlock)


class BatchedLines:
    """The lines arrive in batches, at most `interval` seconds late, one write()
    per batch rather than one per line. Every line is still written, whole and
    in order. (At 5,000 small files the four stage lines per item are 20,000
    system calls, each handing the GIL to the download threads and waiting to
    get it back.) The batch is kept here, not left to stdout's buffer, which
    PYTHONUNBUFFERED=1 turns into a write per line.

    process_lock: shared with forked processes that write to the same stream
    (ProcessWriteLock): each batch is written under it, so lines of several
    processes interleave but never mix.
    """

    measures_lag = True  # logging.MeasuredStreamHandler leaves the log lag to write time here
    flushes_itself = True  # flush() does nothing (the flusher thread writes): MeasuredStreamHandler.emit_fields skips it

    def __init__(self, stream: IO[str], interval: float = 0.2, process_lock: ProcessWriteLock | None = None) -> None:
        self._stream, self._interval = stream, interval
        self.process_lock = process_lock
        self._lines: list[str] = []
        self._first_at = 0.0  # when the batch's oldest line arrived: its lag is the batch's
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reader_left = False
        self._thread = threading.Thread(target=self._flush_periodically, name="mc-log-flush", daemon=True)

    def start(self) -> "BatchedLines":
        self._thread.start()
        return self

    def share_across_processes(self) -> ProcessWriteLock:
        """Before forking writers onto the same stream: the lock they must share."""
        if self.process_lock is None:
            self.process_lock = ProcessWriteLock()
        return self.process_lock

    def write(self, text: str) -> int:
        if self._reader_left:  # nobody reads them any more: do not pile them up for the rest of the run
            return len(text)
        with self._lock:
            if not self._lines:
                self._first_at = time.time()
            self._lines.append(text)
        return len(text)

    def flush(self) -> None:
        """Called by the logging handler after each line: the flusher thread does it."""

    def close(self) -> None:
        """Write what is left; BrokenPipeError if the reader left (`| head`), now or earlier."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if self._reader_left:
            raise BrokenPipeError("the log's reader left")
        self._write_batch()

    def _flush_periodically(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._write_batch()
            except (OSError, ValueError):  # the reader left (`| head`): close() reports it
                self._reader_left = True
                with self._lock:
                    self._lines.clear()
                return

    def _write_batch(self) -> None:
        with self._lock:
            lines, self._lines, first_at = self._lines, [], self._first_at
        if not lines:
            return
        text = "".join(lines)
        if self.process_lock is None:
            self._write(text)
        else:
            with self.process_lock:
                self._write(text)
        LOG_LAG.observe(time.time() - first_at)

    def _write(self, text: str) -> None:
        self._stream.write(text)
        self._stream.flush()

"""fetch-urls' log stream: every line, whole and in order, in a few writes,
also when forked processes share it."""
import io
import logging
import os
import sys
import threading

import pytest

from media_crawler.observe.batched_lines import BatchedLines, ProcessWriteLock


class CountingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


def test_lines_from_many_threads_arrive_whole_and_batched():
    stream = CountingStream()
    batched = BatchedLines(stream, interval=0.05).start()
    handler = logging.StreamHandler(batched)
    logger = logging.getLogger("media_crawler_tests.batched")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        def emit(worker: int) -> None:
            for n in range(500):
                logger.warning("worker %d line %d", worker, n)

        threads = [threading.Thread(target=emit, args=(w,)) for w in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        batched.close()
        logger.removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2000 and len(set(lines)) == 2000
    for worker in range(4):  # each thread's lines keep their order
        own = [line for line in lines if line.startswith(f"worker {worker} ")]
        assert own == [f"worker {worker} line {n}" for n in range(500)]
    assert stream.writes < 200  # batches, not a write per line


def test_close_writes_what_is_still_pending():
    stream = CountingStream()
    batched = BatchedLines(stream, interval=60).start()
    batched.write("last line\n")
    batched.close()
    assert stream.getvalue() == "last line\n"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="shard processes (fork) are Linux only")
def test_processes_sharing_a_pipe_never_mix_lines_longer_than_pipe_buf():
    """Lines of 100 KB (a pipe keeps a write whole only up to 4 KiB) from three
    forked writers: with the shared lock every line arrives whole. (Without
    it, the same test saw mixed lines in 5 runs out of 5.)"""
    read_end, write_end = os.pipe()
    lock = ProcessWriteLock()
    children = []
    for writer in range(3):
        pid = os.fork()
        if pid == 0:  # the child: its own BatchedLines on the shared pipe, as a shard process has
            code = 1
            try:
                os.close(read_end)
                stream = os.fdopen(write_end, "w")
                batched = BatchedLines(stream, interval=0.001, process_lock=lock).start()
                for n in range(20):
                    batched.write(f"{writer}:{n}:" + str(writer) * 100_000 + "\n")
                    threading.Event().wait(0.002)
                batched.close()
                code = 0
            finally:
                os._exit(code)
        children.append(pid)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        lines = pipe.read().splitlines()
    assert all(os.waitpid(pid, 0)[1] == 0 for pid in children)
    whole = {f"{w}:{n}:" + str(w) * 100_000 for w in range(3) for n in range(20)}
    assert sorted(lines) == sorted(whole)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="shard processes (fork) are Linux only")
def test_a_writer_killed_while_holding_the_lock_does_not_stop_the_others():
    lock = ProcessWriteLock()
    held, release = os.pipe()
    pid = os.fork()
    if pid == 0:
        lock.__enter__()
        os.write(release, b"x")  # "I hold it", then die holding it
        os.kill(os.getpid(), 9)
    os.read(held, 1)
    os.waitpid(pid, 0)
    stream = io.StringIO()
    batched = BatchedLines(stream, interval=60, process_lock=lock).start()
    batched.write("after the kill\n")
    batched.close()  # would block forever if the dead writer's lock outlived it
    assert stream.getvalue() == "after the kill\n"


class GoneReader(CountingStream):
    """A pipe whose reader left (`fetch-urls | head`): every write fails."""

    def write(self, text: str) -> int:
        self.writes += 1
        raise BrokenPipeError(32, "Broken pipe")


def test_once_the_reader_left_no_line_is_kept_or_written_and_close_says_so():
    stream = GoneReader()
    batched = BatchedLines(stream, interval=0.01).start()
    batched.write("first\n")
    for _ in range(200):  # the flusher meets the closed pipe
        if stream.writes:
            break
        threading.Event().wait(0.01)
    for n in range(1000):
        batched.write(f"line {n}\n")
    try:
        batched.close()
    except BrokenPipeError:
        pass
    else:
        raise AssertionError("close() must report the reader that left")
    assert stream.writes == 1  # the lines written after it left were dropped, not retried or stored

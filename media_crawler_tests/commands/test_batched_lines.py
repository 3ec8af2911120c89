"""fetch-urls' log stream: every line, whole and in order, in a few writes."""
import io
import logging
import threading

from media_crawler.commands.fetch_urls import BatchedLines


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


def test_a_batch_goes_out_in_whole_lines_of_at_most_pipe_buf_bytes():
    from media_crawler.commands.fetch_urls import PIPE_BUF

    chunks: list[str] = []

    class Recording(io.StringIO):
        def write(self, text: str) -> int:
            chunks.append(text)
            return len(text)

    batched = BatchedLines(Recording(), interval=60).start()
    lines = [f"{n:05d} " + "é" * (n % 300) + "\n" for n in range(400)]
    for line in lines:
        batched.write(line)
    batched.close()
    assert "".join(chunks) == "".join(lines)
    assert all(chunk.endswith("\n") and len(chunk.encode()) <= PIPE_BUF for chunk in chunks)
    assert len(chunks) < 400


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

"""A crawl without Dagster, for the kill tests: the four stages of each partition in one process.

    python -m media_crawler_tests.recovery.crawl_worker CONFIG SOURCE_KEY|DAY ...   # one crawl
    python -m media_crawler_tests.recovery.crawl_worker --forks                     # a fork server

The stages are the pipeline's own; only Dagster's orchestration is left out.
The fork server imports everything once and forks a fresh child per crawl, so
a kill-and-restart costs milliseconds instead of an interpreter start: that
is what lets the chaos test kill a crawl twenty times and stay fast. The
server holds no database connection and no thread when it forks.

Fork server protocol, one JSON object per line (the server first says {"ready": true}):
    stdin  {"config": path, "partitions": [...], "crash_at": "point:n" | null, "log": path}
    stdout {"started": pid}            then   {"pid": pid, "exit": code, "signal": n | null}
    stdin  "kill"  (while a child runs) SIGKILLs the child: a crash at a moment the test chose.
"""
from __future__ import annotations

import json
import os
import select
import signal
import sys
import traceback

from media_crawler.config import load_config
from media_crawler.errors import CrawlError
from media_crawler.models import DayWindow
from media_crawler.observe.logging import configure
from media_crawler.pipeline.discover import discover
from media_crawler.pipeline.download import download_partition
from media_crawler.pipeline.runtime import Runtime
from media_crawler.pipeline.verify_commit import commit_partition, verify_partition
from media_crawler.crashpoints import CRASH_ENV


def crawl(config_path: str, partitions: list[str]) -> dict:
    config = load_config(config_path)
    runtime = Runtime.from_config(config)
    for spec in partitions:
        source_key, day = spec.split("|")
        source, window = config.source_by_key(source_key), DayWindow.parse(day)
        try:
            discover(runtime, source, window)
        except CrawlError:
            pass  # the partition stays unfinished; the test's final check says so
        download_partition(runtime, source, window, ignore_backoff=True)
        verify_partition(runtime, source, window)
        commit_partition(runtime, source, window)
    return runtime.ledger.state_counts()


def _child(job: dict) -> None:
    """Runs in the forked child; never returns."""
    code = 1
    try:
        log = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        if job.get("crash_at"):
            os.environ[CRASH_ENV] = job["crash_at"]
        else:
            os.environ.pop(CRASH_ENV, None)
        configure(stream=os.fdopen(1, "w", buffering=1, closefd=False))
        states = crawl(job["config"], job["partitions"])
        print(json.dumps({"states": states}), flush=True)
        code = 0
    except BaseException:
        traceback.print_exc()  # into the run's log: os._exit below would swallow it
        sys.stderr.flush()
    finally:
        os._exit(code)  # never run the server's cleanup in the child


def _wait_or_kill(pid: int) -> int:
    """Wait for the child; a 'kill' line on stdin SIGKILLs it first. Returns the wait status."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        ready, _, _ = select.select([sys.stdin], [], [], 0.005)
        if ready and sys.stdin.readline().strip() == "kill":
            os.kill(pid, signal.SIGKILL)  # not reaped yet: the pid cannot have been reused


def serve_forks() -> int:
    print(json.dumps({"ready": True}), flush=True)  # imports done: jobs start within milliseconds
    for line in iter(sys.stdin.readline, ""):
        if not line.strip() or line.strip() == "kill":
            continue  # a kill that arrived after its child ended
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(job)
        print(json.dumps({"started": pid}), flush=True)
        status = _wait_or_kill(pid)
        killed_by = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        print(json.dumps({"pid": pid, "exit": exit_code, "signal": killed_by}), flush=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--forks"]:
        sys.exit(serve_forks())
    configure()
    print(json.dumps({"states": crawl(sys.argv[1], sys.argv[2:])}), flush=True)

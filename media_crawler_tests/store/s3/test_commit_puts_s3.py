"""The commit stage's puts into an s3:// store overlap (pipeline/commit_ahead.py): at most
`concurrent_puts` at once, settled in order; a throttled put turns the look-ahead off; a
store that fails stops the stage, and the next run commits the rest, including items whose
put ended after the stage stopped (their staged file gone, their object there)."""
from __future__ import annotations

import threading

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.pipeline.verify_commit import commit_partition
from media_crawler.store.ledger import COMMITTED, VERIFIED
from media_crawler.store.s3.blob_store import S3BlobStore
from media_crawler_tests.store.s3.test_commit_check_s3 import verified_partition

WAIT_S = 60  # a guard against a hang, never a measure: the tests wait on events, not on time


class Puts:
    """put_if_absent watched: how many run at once, and a failure to raise on chosen calls."""

    def __init__(self, monkeypatch, fail: dict[int, ErrorClass] | None = None) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.at_start: list[int] = []  # puts running when each began (itself included)
        self.fail = fail or {}
        self.second_began = threading.Event()
        real = S3BlobStore.put_if_absent

        def watched(store, staged, sha256, **kwargs):
            with self.lock:
                self.running += 1
                call = len(self.at_start)
                self.at_start.append(self.running)
            try:
                if call == 0:  # the first put waits until another has begun: they overlap
                    self.second_began.wait(WAIT_S)
                elif call == 1:
                    self.second_began.set()
                if call in self.fail:
                    raise CrawlError(self.fail[call], "injected")
                return real(store, staged, sha256, **kwargs)
            finally:
                with self.lock:
                    self.running -= 1

        monkeypatch.setattr(S3BlobStore, "put_if_absent", watched)


def test_puts_overlap_up_to_the_stores_bound_and_every_item_commits(crawl_home, simulator, s3_server, monkeypatch):
    runtime, source, window = verified_partition(crawl_home, simulator, s3_server, monkeypatch)
    verified = runtime.ledger.tasks(states=[VERIFIED])
    assert len(verified) > S3BlobStore.concurrent_puts
    puts = Puts(monkeypatch)
    report = commit_partition(runtime, source, window)
    assert puts.second_began.is_set(), "a second put began while the first ran"
    assert max(puts.at_start) <= S3BlobStore.concurrent_puts
    assert report.ok + report.extra.get("items_deduplicated", 0) == len(verified)
    committed = runtime.ledger.tasks(states=[COMMITTED])
    assert {task.id for task in committed} == {task.id for task in verified}
    assert all(runtime.store.exists(task.sha256) for task in committed)
    assert list(runtime.store.iter_parts()) == [], "every staged file removed once its object was confirmed"


def test_a_throttled_put_turns_the_look_ahead_off(crawl_home, simulator, s3_server, monkeypatch):
    runtime, source, window = verified_partition(crawl_home, simulator, s3_server, monkeypatch)
    width = S3BlobStore.concurrent_puts
    puts = Puts(monkeypatch, fail={0: ErrorClass.RATE_LIMITED})
    commit_partition(runtime, source, window)
    assert puts.at_start[width:] and set(puts.at_start[width:]) == {1}, \
        "after the throttled answer, one put at a time"


def test_a_failing_store_stops_the_stage_and_the_next_run_commits_the_rest(crawl_home, simulator, s3_server,
                                                                          monkeypatch):
    runtime, source, window = verified_partition(crawl_home, simulator, s3_server, monkeypatch)
    verified = {task.id for task in runtime.ledger.tasks(states=[VERIFIED])}
    puts = Puts(monkeypatch, fail={0: ErrorClass.STORAGE_ERROR})
    report = commit_partition(runtime, source, window)
    assert report.ok == 0, "the stage stopped at the first item"
    begun = len(puts.at_start)
    assert 1 < begun <= S3BlobStore.concurrent_puts, "the puts begun ahead ended; none began after the stop"
    assert len(runtime.ledger.tasks(states=[COMMITTED])) == 0
    monkeypatch.undo()
    commit_partition(runtime, source, window)
    committed = runtime.ledger.tasks(states=[COMMITTED])
    assert {task.id for task in committed} | {task.id for task in runtime.ledger.tasks(states=["failed"])} == verified
    assert len(committed) >= len(verified) - 1
    assert all(runtime.store.exists(task.sha256) for task in committed)
    failed = runtime.ledger.tasks(states=["failed"])
    assert {path.name for path in runtime.store.iter_parts()} == {f"{task.staging_name}.part" for task in failed}, \
        "only the failed item keeps its staged file (as in a serial commit)"

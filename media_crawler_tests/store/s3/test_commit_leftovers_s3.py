"""The commit stage on an s3:// store, where it takes only what an older run left verified
and staged (the download step commits in place there: pipeline/settle_in_place.py): every
item committed and verified, its staged file removed once its object is confirmed; a
store that fails stops the stage, and the next run commits the rest."""
from __future__ import annotations

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.pipeline.verify_commit import commit_partition
from media_crawler.store.ledger import COMMITTED, VERIFIED
from media_crawler.store.s3.blob_store import S3BlobStore
from media_crawler_tests.store.s3.test_commit_check_s3 import verified_partition_s3


class Puts:
    """put_if_absent watched: how many calls, and a failure to raise on chosen ones."""

    def __init__(self, monkeypatch, fail: dict[int, ErrorClass] | None = None) -> None:
        self.calls = 0
        self.fail = fail or {}
        real = S3BlobStore.put_if_absent

        def watched(store, staged, sha256, **kwargs):
            call, self.calls = self.calls, self.calls + 1
            if call in self.fail:
                raise CrawlError(self.fail[call], "injected")
            return real(store, staged, sha256, **kwargs)

        monkeypatch.setattr(S3BlobStore, "put_if_absent", watched)


def test_every_staged_leftover_is_committed_and_its_object_confirmed(crawl_home, simulator, s3_server, monkeypatch):
    runtime, source, window = verified_partition_s3(crawl_home, simulator, s3_server, monkeypatch)
    verified = runtime.ledger.tasks(states=[VERIFIED])
    assert len(verified) > 1
    puts = Puts(monkeypatch)
    report = commit_partition(runtime, source, window)
    assert puts.calls == len(verified)
    assert report.ok + report.extra.get("items_deduplicated", 0) == len(verified)
    committed = runtime.ledger.tasks(states=[COMMITTED])
    assert {task.id for task in committed} == {task.id for task in verified}
    assert all(runtime.store.exists(task.sha256) for task in committed)
    assert list(runtime.store.iter_parts()) == [], "every staged file removed once its object was confirmed"


def test_a_failing_store_stops_the_stage_and_the_next_run_commits_the_rest(crawl_home, simulator, s3_server,
                                                                          monkeypatch):
    runtime, source, window = verified_partition_s3(crawl_home, simulator, s3_server, monkeypatch)
    verified = {task.id for task in runtime.ledger.tasks(states=[VERIFIED])}
    puts = Puts(monkeypatch, fail={0: ErrorClass.STORAGE_ERROR})
    report = commit_partition(runtime, source, window)
    assert report.ok == 0 and puts.calls == 1, "the stage stopped at the first item: no put after it"
    assert len(runtime.ledger.tasks(states=[COMMITTED])) == 0
    monkeypatch.undo()
    commit_partition(runtime, source, window)
    committed = runtime.ledger.tasks(states=[COMMITTED])
    assert {task.id for task in committed} | {task.id for task in runtime.ledger.tasks(states=["failed"])} == verified
    assert len(committed) >= len(verified) - 1
    assert all(runtime.store.exists(task.sha256) for task in committed)
    failed = runtime.ledger.tasks(states=["failed"])
    assert {path.name for path in runtime.store.iter_parts()} == {f"{task.staging_name}.part" for task in failed}, \
        "only the failed item keeps its staged file"

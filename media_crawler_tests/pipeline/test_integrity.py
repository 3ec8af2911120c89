"""The commit guard's blob check: presence always, re-hash for this run's commits (or all)."""
import time

from media_crawler.pipeline.integrity import partition_blob_mismatches
from media_crawler.pipeline.verify_commit import commit_partition
from media_crawler_tests.verified_partition import verified_partition


def test_missing_blobs_are_always_found_and_corrupt_ones_when_rehashed(crawl_home, simulator):
    runtime, source, window = verified_partition(crawl_home, simulator)
    commit_partition(runtime, source, window)
    assert partition_blob_mismatches(runtime, source, window) == []

    first, second = [runtime.store.path_for(t.sha256) for t in runtime.ledger.tasks(states=["committed"])[:2]]
    first.chmod(0o644)
    first.write_bytes(b"bit rot")
    second.unlink()
    full = {(p["problem"], p["sha256"]) for p in partition_blob_mismatches(runtime, source, window)}
    assert full == {("hash", first.name), ("missing", second.name)}
    # Commits older than this run are only checked for presence: reconcile --verify-hashes re-reads them.
    recent = partition_blob_mismatches(runtime, source, window, rehash_since=time.time() + 1)
    assert {(p["problem"], p["sha256"]) for p in recent} == {("missing", second.name)}

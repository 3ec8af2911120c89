"""The commit's blocking check on an s3:// store (pipeline/integrity.py): one HEAD a blob
(present, the ledger's size, the sha256 the server verified on upload), no download, and
it still finds a missing object and one whose recorded sha256 is not its name;
`rehash_commits: true` downloads this run's commits and re-hashes them."""
from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter

import pytest

from media_crawler.pipeline.integrity import partition_blob_mismatches
from media_crawler.pipeline.verify_commit import commit_partition
from media_crawler.store.s3 import client as client_module
from media_crawler_tests.verified_partition import verified_partition


@pytest.fixture
def sent(monkeypatch):
    """The S3 requests made, by method."""
    methods: Counter = Counter()
    request = client_module.S3Client.request

    def counting(self, method, bucket, key="", **kwargs):
        methods[method] += 1
        return request(self, method, bucket, key, **kwargs)

    monkeypatch.setattr(client_module.S3Client, "request", counting)
    return methods


def verified_partition_s3(crawl_home, simulator, s3_server, monkeypatch):
    """verified_partition on a fresh bucket prefix: the commit stage's input."""
    for name, value in s3_server.environment.items():
        monkeypatch.setenv(name, value)
    return verified_partition(crawl_home, simulator, store=s3_server.new_uri())


def committed_partition(crawl_home, simulator, s3_server, monkeypatch):
    runtime, source, window = verified_partition_s3(crawl_home, simulator, s3_server, monkeypatch)
    commit_partition(runtime, source, window)
    return runtime, source, window


def test_the_check_asks_for_the_record_and_still_finds_a_missing_and_a_mislabelled_object(
        crawl_home, simulator, s3_server, monkeypatch, sent):
    runtime, source, window = committed_partition(crawl_home, simulator, s3_server, monkeypatch)
    committed = runtime.ledger.tasks(states=["committed"])
    assert len(committed) >= 2
    sent.clear()
    assert partition_blob_mismatches(runtime, source, window, rehash_since=0.0) == []
    assert sent == Counter({"HEAD": len(committed)}), "one HEAD a blob, no download"

    store = runtime.store
    first, second = committed[0].sha256, committed[1].sha256
    other = b"other bytes"  # the server's checksum is of these; the metadata claims the name
    store.client.put_object(store.bucket, store.key_for(first), other, hashlib.sha256(other).digest(),
                            headers={"x-amz-meta-sha256": first})
    store.client.delete_object(store.bucket, store.key_for(second))
    found = {(p["problem"], p["sha256"]) for p in partition_blob_mismatches(runtime, source, window)}
    assert found == {("size", first), ("missing", second)}

    # Same length, other bytes, recorded as the name: only the record or the bytes can tell.
    size = committed[0].size
    same_length = bytes(size)
    store.client.put_object(store.bucket, store.key_for(first), same_length, hashlib.sha256(same_length).digest(),
                            headers={"x-amz-meta-sha256": first})
    found = {(p["problem"], p["sha256"]) for p in partition_blob_mismatches(runtime, source, window)}
    assert found == {("hash", first), ("missing", second)}, "the server's checksum is not the name"


def test_rehash_commits_downloads_this_runs_commits(crawl_home, simulator, s3_server, monkeypatch, sent):
    runtime, source, window = committed_partition(crawl_home, simulator, s3_server, monkeypatch)
    committed = runtime.ledger.tasks(states=["committed"])
    rehashing = dataclasses.replace(runtime, config=dataclasses.replace(runtime.config, rehash_commits=True))
    sent.clear()
    assert partition_blob_mismatches(rehashing, source, window, rehash_since=0.0) == []
    assert sent["GET"] == len(committed)
    sent.clear()
    partition_blob_mismatches(rehashing, source, window, rehash_since=float("inf"))
    assert sent == Counter({"HEAD": len(committed)}), "earlier commits: presence only"

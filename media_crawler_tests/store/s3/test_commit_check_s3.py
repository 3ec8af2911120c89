"""The commit's blocking check on an s3:// store (pipeline/integrity.py): one HEAD a blob
(present, the ledger's size, the sha256 the server verified on upload), no download, and
it still finds a missing object and one whose recorded sha256 is not its name;
`rehash_commits: true` downloads this run's commits and re-hashes them."""
from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter

import pytest
import yaml

from media_crawler.config import load_config
from media_crawler.models import DayWindow
from media_crawler.pipeline.discover import discover
from media_crawler.pipeline.download import download_partition
from media_crawler.pipeline.integrity import partition_blob_mismatches
from media_crawler.pipeline.runtime import Runtime
from media_crawler.pipeline.verify_commit import commit_partition, verify_partition
from media_crawler.store.s3 import client as client_module
from media_crawler_tests.conftest import write_config


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


def verified_partition(crawl_home, simulator, s3_server, monkeypatch):
    """A Runtime on a fresh bucket prefix, the simulator's URL list discovered, downloaded
    and verified for its last day: the commit stage's input."""
    for name, value in s3_server.environment.items():
        monkeypatch.setenv(name, value)
    path = write_config(crawl_home, simulator, [{"urls": f"{simulator.base_url}/urls/demo.json"}])
    data = yaml.safe_load(path.read_text())
    data["store"] = s3_server.new_uri()
    path.write_text(yaml.safe_dump(data))
    config = load_config(path)
    runtime = Runtime.from_config(config)
    [source] = config.sources
    window = DayWindow.parse(simulator.truth()["days"][-1])
    discover(runtime, source, window)
    download_partition(runtime, source, window)
    verify_partition(runtime, source, window)
    return runtime, source, window


def committed_partition(crawl_home, simulator, s3_server, monkeypatch):
    runtime, source, window = verified_partition(crawl_home, simulator, s3_server, monkeypatch)
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

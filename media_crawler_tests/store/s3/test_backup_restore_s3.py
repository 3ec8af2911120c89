"""Backup and restore with a bucket as the store (SeaweedFS): a crawl's blobs in one bucket
prefix are backed up to a folder, checked on the way, and restored into another, empty
bucket prefix that the restored sources.yaml then names; a prefix holding blobs is refused."""
from __future__ import annotations

import hashlib
import io

import pytest
import yaml

from media_crawler.config import ConfigError, load_config
from media_crawler.recovery.backup import backup
from media_crawler.recovery.restore import restore
from media_crawler.store.database import dispose_engines
from media_crawler.store.ledger import Ledger
from media_crawler.store.open_store import open_blob_store


@pytest.fixture
def bucket_crawl(s3_server, tmp_path, monkeypatch):
    """A sources.yaml whose store is a bucket prefix holding three blobs, and its ledger."""
    for name, value in s3_server.environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("MEDIA_CRAWLER_LEDGER_URL", raising=False)
    monkeypatch.setenv("MEDIA_CRAWLER_HOME", str(tmp_path / "var"))
    home = tmp_path / "original"
    home.mkdir()
    path = home / "sources.yaml"
    path.write_text(yaml.safe_dump({"store": s3_server.new_uri(), "ledger_url": f"sqlite:///{home / 'ledger.db'}",
                                    "sources": [{"weibo": "user 678"}]}))
    config = load_config(path)
    Ledger(config.ledger_url)
    store = open_blob_store(config.store_location, create=True, local_root=config.store_root)
    for n in range(3):
        store.put_stream_if_absent(io.BytesIO(f"blob {n}".encode()))
    yield config
    dispose_engines()


def test_a_bucket_store_backs_up_to_a_folder_and_restores_into_another_bucket(bucket_crawl, s3_server, tmp_path):
    manifest = backup(bucket_crawl, None, tmp_path / "backup")
    assert manifest.blobs["copied"] == 3 and manifest.blobs["corrupt"] == []
    target = s3_server.new_uri()
    summary = restore(tmp_path / "backup", tmp_path / "restored", store_uri=target)
    assert summary.blobs == 3
    restored = load_config(summary.config_path)
    assert restored.store_url == target
    store = open_blob_store(restored.store_location, local_root=restored.store_root)
    names = set(store.iter_sha256s())
    assert names == {hashlib.sha256(f"blob {n}".encode()).hexdigest() for n in range(3)}
    for name in names:
        with store.open(name) as stream:
            assert hashlib.sha256(stream.read()).hexdigest() == name
    assert not (tmp_path / "restored" / "store" / "sha256").exists(), "no blob on local disk"


def test_restore_into_a_bucket_prefix_that_holds_blobs_is_refused(bucket_crawl, tmp_path):
    backup(bucket_crawl, None, tmp_path / "backup")
    with pytest.raises(ConfigError, match="holds blobs already"):
        restore(tmp_path / "backup", tmp_path / "restored", store_uri=bucket_crawl.store_url)
    assert not (tmp_path / "restored").exists()

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


def _three_blob_crawl(s3_server, tmp_path, monkeypatch, store_of):
    """A crawl home whose store (`store_of(home)`) holds three blobs, and its ledger."""
    for name, value in s3_server.environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("MEDIA_CRAWLER_LEDGER_URL", raising=False)
    monkeypatch.setenv("MEDIA_CRAWLER_HOME", str(tmp_path / "var"))
    home = tmp_path / "original"
    home.mkdir()
    path = home / "sources.yaml"
    path.write_text(yaml.safe_dump({"store": store_of(home), "ledger_url": f"sqlite:///{home / 'ledger.db'}",
                                    "sources": [{"weibo": "user 678"}]}))
    config = load_config(path)
    Ledger(config.ledger_url)
    store = open_blob_store(config.store_location, create=True, local_root=config.store_root)
    for n in range(3):
        store.put_stream_if_absent(io.BytesIO(f"blob {n}".encode()))
    yield config
    dispose_engines()


@pytest.fixture
def bucket_crawl(s3_server, tmp_path, monkeypatch):
    """A sources.yaml whose store is a bucket prefix holding three blobs, and its ledger."""
    yield from _three_blob_crawl(s3_server, tmp_path, monkeypatch, lambda home: s3_server.new_uri())


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


# -- backup to a bucket, restore from a bucket (a second bucket: the backups') -------------
BACKUPS = "crawl-backups"


@pytest.fixture
def folder_crawl(s3_server, tmp_path, monkeypatch):
    """A crawl whose store is a folder holding three blobs, and its ledger."""
    yield from _three_blob_crawl(s3_server, tmp_path, monkeypatch, lambda home: str(home / "store"))


def blob_names(n: int = 3) -> set[str]:
    return {hashlib.sha256(f"blob {k}".encode()).hexdigest() for k in range(n)}


@pytest.mark.parametrize("crawl", ["folder_crawl", "bucket_crawl"])
def test_a_backup_to_a_bucket_restores_from_it_and_a_second_backup_copies_nothing_again(
        crawl, request, s3_server, tmp_path):
    config = request.getfixturevalue(crawl)
    target = s3_server.new_uri(BACKUPS)
    manifest = backup(config, None, target)
    assert manifest.blobs["copied"] == 3 and manifest.blobs["corrupt"] == []
    keys = s3_server.keys(target)
    prefix = target.split("/", 3)[3]
    assert {f"{prefix}/manifest.json", f"{prefix}/ledger.db", f"{prefix}/sources.yaml"} <= set(keys)
    assert len([key for key in keys if "/store/sha256/" in key]) == 3
    assert not list(config.store_root.glob(".bucket-backup-*")), "the local work folder is removed"
    again = backup(config, None, target)
    assert again.blobs["copied"] == 0 and again.blobs["already_there"] == 3

    summary = restore(target, tmp_path / "restored")
    assert summary.blobs == 3
    restored = load_config(summary.config_path)
    store = open_blob_store(restored.store_location, local_root=restored.store_root)
    assert set(store.iter_sha256s()) == blob_names()
    for name in blob_names():
        with store.open(name) as stream:
            assert hashlib.sha256(stream.read()).hexdigest() == name
    assert (tmp_path / "restored" / "ledger.db").is_file()
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".bucket-backup-")] == []


def test_a_backup_killed_while_copying_blobs_leaves_no_ledger_in_the_bucket_and_converges_when_run_again(
        folder_crawl, s3_server, tmp_path, monkeypatch):
    from media_crawler.store.s3.blob_store import S3BlobStore

    target = s3_server.new_uri(BACKUPS)
    prefix = target.split("/", 3)[3]
    real = S3BlobStore.put_stream_if_absent
    calls = []

    def dies_on_the_second(self, stream, sha256=None):
        calls.append(sha256)
        if len(calls) == 2:
            raise KeyboardInterrupt  # the process killed mid-copy
        return real(self, stream, sha256)

    monkeypatch.setattr(S3BlobStore, "put_stream_if_absent", dies_on_the_second)
    with pytest.raises(KeyboardInterrupt):
        backup(folder_crawl, None, target)
    keys = s3_server.keys(target)
    assert len([key for key in keys if "/store/sha256/" in key]) == 1
    assert f"{prefix}/ledger.db" not in keys and f"{prefix}/manifest.json" not in keys, \
        "no ledger naming blobs the bucket lacks, no manifest saying the backup is complete"
    with pytest.raises(ConfigError, match="not a media-crawler backup"):
        restore(target, tmp_path / "too-early")
    assert not (tmp_path / "too-early").exists()
    monkeypatch.setattr(S3BlobStore, "put_stream_if_absent", real)
    manifest = backup(folder_crawl, None, target)
    assert manifest.blobs["copied"] == 2 and manifest.blobs["already_there"] == 1
    summary = restore(target, tmp_path / "restored")
    assert summary.blobs == 3


def test_a_file_altered_in_the_backup_bucket_is_refused_on_restore(folder_crawl, s3_server, tmp_path):
    from media_crawler.errors import CrawlError, ErrorClass
    from media_crawler.store.s3.settings import parse_uri

    target = s3_server.new_uri(BACKUPS)
    backup(folder_crawl, None, target)
    uri = parse_uri(target)
    client = s3_server.client()
    key = f"{uri.prefix}/sources.yaml"
    body = b"sources: []\n"
    # Other bytes under the name, the metadata still saying the backed-up file's sha256.
    recorded = client.head_object(uri.bucket, key).metadata["sha256"]
    client.put_object(uri.bucket, key, body, hashlib.sha256(body).digest(), headers={"x-amz-meta-sha256": recorded})
    with pytest.raises(CrawlError) as caught:
        restore(target, tmp_path / "restored")
    assert caught.value.error_class is ErrorClass.HASH_MISMATCH
    assert not (tmp_path / "restored").exists()


def test_backup_to_a_missing_bucket_or_with_a_wrong_secret_is_one_line(folder_crawl, s3_server, monkeypatch, capsys):
    import json

    from media_crawler.cli import main as cli_main

    def failure(argv):
        capsys.readouterr()
        assert cli_main(argv) != 0
        lines = [line for line in capsys.readouterr().err.splitlines() if '"command_failed"' in line]
        assert len(lines) == 1
        return json.loads(lines[0])

    args = ["backup", "--config", str(folder_crawl.path), "--dagster-home", "/nonexistent"]
    missing = failure(args + ["--to", "s3://no-such-backup-bucket/x"])
    assert missing["error_class"] == "storage_error" and "NoSuchBucket" in missing["message"]
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-for-the-backup")
    wrong = failure(args + ["--to", s3_server.new_uri(BACKUPS)])
    assert wrong["error_class"] == "auth" and "wrong-secret-for-the-backup" not in json.dumps(wrong)
    restored = failure(["restore", "--from", s3_server.new_uri(BACKUPS), "--home", str(folder_crawl.path.parent / "r")])
    assert restored["error_class"] == "auth"


def test_the_commands_take_a_bucket_uri_as_it_is_written(folder_crawl, s3_server, tmp_path, capsys):
    from media_crawler.cli import main as cli_main

    target = s3_server.new_uri(BACKUPS)
    assert cli_main(["backup", "--config", str(folder_crawl.path), "--dagster-home", str(tmp_path / "none"),
                     "--to", target]) == 0
    assert f"backup in {target}:" in capsys.readouterr().err
    assert cli_main(["restore", "--from", target, "--home", str(tmp_path / "restored")]) == 0
    assert "(3 blobs)" in capsys.readouterr().err

"""The content-addressed store: atomic, put-if-absent commits named by sha256."""
import hashlib
import os

import pytest

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.store.cas import BlobStore


def stage(store: BlobStore, name: str, data: bytes):
    part = store.staging_path(name)
    part.write_bytes(data)
    return part, hashlib.sha256(data).hexdigest()


def test_commit_moves_staged_bytes_under_their_hash(tmp_path):
    store = BlobStore(tmp_path).ensure()
    part, digest = stage(store, "task-1", b"jpeg bytes")
    result = store.commit(part, digest)
    assert result.created and result.path == tmp_path / "sha256" / digest[:2] / digest[2:4] / digest
    assert result.path.read_bytes() == b"jpeg bytes"
    assert not part.exists()


def test_same_content_twice_is_stored_once(tmp_path):
    store = BlobStore(tmp_path).ensure()
    first, digest = stage(store, "task-1", b"same")
    second, _ = stage(store, "task-2", b"same")
    assert store.commit(first, digest).created
    assert not store.commit(second, digest).created
    assert len(list(store.iter_blobs())) == 1 and not list(store.iter_parts())


def test_wrong_hash_never_enters_the_store(tmp_path):
    store = BlobStore(tmp_path).ensure()
    part, _ = stage(store, "task-1", b"bytes")
    with pytest.raises(CrawlError) as info:
        store.commit(part, hashlib.sha256(b"other").hexdigest())
    assert info.value.error_class is ErrorClass.HASH_MISMATCH
    assert list(store.iter_blobs()) == []


def test_recommit_after_crash_between_link_and_ledger_is_a_no_op(tmp_path):
    """The part was linked and unlinked, then the process died before the ledger row."""
    store = BlobStore(tmp_path).ensure()
    part, digest = stage(store, "task-1", b"data")
    store.commit(part, digest)
    again = store.commit(part, digest)  # .part is gone now; the blob is whole
    assert not again.created and again.path.read_bytes() == b"data"


def test_staging_names_cannot_escape_the_staging_folder(tmp_path):
    store = BlobStore(tmp_path).ensure()
    for bad in ("../x", "a/b", ".hidden", ""):
        with pytest.raises(ValueError):
            store.staging_path(bad)


def test_enospc_is_disk_full(tmp_path, monkeypatch):
    store = BlobStore(tmp_path).ensure()
    part, digest = stage(store, "task-1", b"data")

    def no_space(*_args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "link", no_space)
    with pytest.raises(CrawlError) as info:
        store.commit(part, digest)
    assert info.value.error_class is ErrorClass.DISK_FULL
    assert list(store.iter_blobs()) == []

"""The content-addressed store: atomic, put-if-absent commits named by sha256."""
import hashlib
import os
from pathlib import Path

import pytest

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.store.cas import FilesystemBlobStore


def stage(store: FilesystemBlobStore, name: str, data: bytes):
    part = store.staging_path(name)
    part.write_bytes(data)
    return part, hashlib.sha256(data).hexdigest()


def test_commit_moves_staged_bytes_under_their_hash(tmp_path):
    store = FilesystemBlobStore(tmp_path).ensure()
    part, digest = stage(store, "task-1", b"jpeg bytes")
    result = store.put_if_absent(part, digest)
    assert result.created and store.path_for(digest) == tmp_path / "sha256" / digest[:2] / digest[2:4] / digest
    assert store.path_for(digest).read_bytes() == b"jpeg bytes"
    assert not part.exists()


def test_same_content_twice_is_stored_once(tmp_path):
    store = FilesystemBlobStore(tmp_path).ensure()
    first, digest = stage(store, "task-1", b"same")
    second, _ = stage(store, "task-2", b"same")
    assert store.put_if_absent(first, digest).created
    assert not store.put_if_absent(second, digest).created
    assert len(list(store.iter_sha256s())) == 1 and not list(store.iter_parts())


def test_wrong_hash_never_enters_the_store(tmp_path):
    store = FilesystemBlobStore(tmp_path).ensure()
    part, _ = stage(store, "task-1", b"bytes")
    with pytest.raises(CrawlError) as info:
        store.put_if_absent(part, hashlib.sha256(b"other").hexdigest())
    assert info.value.error_class is ErrorClass.HASH_MISMATCH
    assert list(store.iter_sha256s()) == []


def test_recommit_after_crash_between_link_and_ledger_is_a_no_op(tmp_path):
    """The part was linked and unlinked, then the process died before the ledger row."""
    store = FilesystemBlobStore(tmp_path).ensure()
    part, digest = stage(store, "task-1", b"data")
    store.put_if_absent(part, digest)
    again = store.put_if_absent(part, digest)  # .part is gone now; the blob is whole
    assert not again.created and store.path_for(digest).read_bytes() == b"data"


def test_staging_names_cannot_escape_the_staging_folder(tmp_path):
    store = FilesystemBlobStore(tmp_path).ensure()
    for bad in ("../x", "a/b", ".hidden", ""):
        with pytest.raises(ValueError):
            store.staging_path(bad)


def test_enospc_is_disk_full(tmp_path, monkeypatch):
    store = FilesystemBlobStore(tmp_path).ensure()
    part, digest = stage(store, "task-1", b"data")

    def no_space(*_args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "link", no_space)
    with pytest.raises(CrawlError) as info:
        store.put_if_absent(part, digest)
    assert info.value.error_class is ErrorClass.DISK_FULL
    assert list(store.iter_sha256s()) == []


def test_commit_with_known_size_makes_missing_folders_and_dedups_by_link(tmp_path):
    """The fast path (hash computed while streaming): the link is the existence test."""
    store = FilesystemBlobStore(tmp_path).ensure()
    first, digest = stage(store, "task-1", b"streamed")
    created = store.put_if_absent(first, digest, verify_hash=False, synced=True, size=8)
    assert created.created and created.size == 8 and store.path_for(digest).read_bytes() == b"streamed"
    second, _ = stage(store, "task-2", b"streamed")
    again = store.put_if_absent(second, digest, verify_hash=False, synced=True, size=8)
    assert not again.created and not second.exists() and again.sha256 == created.sha256


def test_a_missing_staged_file_is_an_error_not_a_new_folder(tmp_path):
    store = FilesystemBlobStore(tmp_path).ensure()
    digest = hashlib.sha256(b"gone").hexdigest()
    with pytest.raises(CrawlError) as info:
        store.put_if_absent(store.staging_path("task-9"), digest, verify_hash=False, synced=True, size=4)
    assert info.value.error_class is ErrorClass.STORAGE_ERROR
    assert not (tmp_path / "sha256" / digest[:2]).exists()


@pytest.mark.parametrize("relative", [False, True], ids=["absolute root", "relative root"])
def test_a_commit_remakes_every_missing_folder_of_the_blob(tmp_path, monkeypatch, relative):
    """The folders are made from the blob's path as text, relative or not: a store whose
    sha256/ was removed under a run gets it back with both fan-out levels."""
    import shutil

    monkeypatch.chdir(tmp_path)
    root = Path("store") if relative else tmp_path / "store"
    store = FilesystemBlobStore(root).ensure()
    shutil.rmtree(root / "sha256")
    part, digest = stage(store, "task-1", b"bytes")
    stored = store.put_if_absent(part, digest, verify_hash=False, synced=True, size=5)
    assert stored.created and (tmp_path / "store" / "sha256" / digest[:2] / digest[2:4] / digest).read_bytes() == b"bytes"


def test_free_space_is_read_at_most_every_half_second(tmp_path, monkeypatch):
    import shutil
    from collections import namedtuple

    store = FilesystemBlobStore(tmp_path).ensure()
    usage = namedtuple("usage", "total used free")
    answers = iter([usage(10, 5, 5), usage(10, 9, 1)])
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: next(answers))
    clock = iter([100.0, 100.2, 100.6])
    monkeypatch.setattr("media_crawler.store.cas.time.monotonic", lambda: next(clock))
    assert [store.free_bytes(), store.free_bytes(), store.free_bytes()] == [5, 5, 1]


def test_folders_a_commit_makes_are_synced_in_their_parents(tmp_path, monkeypatch):
    """fsync of a new folder does not make its name in the parent durable: the parent is synced too."""
    import media_crawler.store.cas as cas

    synced = []
    monkeypatch.setattr(cas, "_fsync_dir", synced.append)
    store = FilesystemBlobStore(tmp_path).ensure()
    blobs = tmp_path / "sha256"
    assert synced == [tmp_path]  # ensure() made sha256/ and staging/

    def commit(data: bytes, existing_levels: int) -> str:
        """Commit `data` with 0, 1 or 2 of its fan-out folders already there."""
        part, digest = stage(store, f"task-{len(data)}", data)
        folders = [blobs / digest[:2], blobs / digest[:2] / digest[2:4]]
        for folder in folders[:existing_levels]:
            folder.mkdir(exist_ok=True)
        synced.clear()  # the folders, as paths or their text
        store.put_if_absent(part, digest, verify_hash=False, synced=True, size=len(data))
        return digest

    first = commit(b"first blob", existing_levels=0)  # sha256/ab/ and sha256/ab/cd/ made
    assert [Path(folder) for folder in synced] == [blobs / first[:2] / first[2:4], blobs / first[:2], blobs]
    second = commit(b"the second blob", existing_levels=1)  # only sha256/ab/cd/ made
    assert [Path(folder) for folder in synced] == [blobs / second[:2] / second[2:4], blobs / second[:2]]
    third = commit(b"and a third blob", existing_levels=2)  # nothing made
    assert [Path(folder) for folder in synced] == [blobs / third[:2] / third[2:4]]

    synced.clear()
    FilesystemBlobStore(tmp_path).ensure()  # an existing store: nothing to sync
    assert synced == []


def test_a_dedup_makes_the_blobs_folders_durable_before_its_row(tmp_path, monkeypatch):
    """A put that finds the blob already linked (a concurrent writer may not have synced its
    folders yet) makes the blob's folder chain durable too: registered for the deferred flush
    inside deferred_sync(), synced at once outside it."""
    import media_crawler.store.cas as cas

    store = FilesystemBlobStore(tmp_path).ensure()
    blobs = tmp_path / "sha256"
    part, digest = stage(store, "task-a", b"the same bytes")
    store.put_if_absent(part, digest, verify_hash=False, synced=True)
    chain = {blobs / digest[:2] / digest[2:4], blobs / digest[:2], blobs}

    synced: list[set] = []
    monkeypatch.setattr(cas, "_sync_folders", lambda _root, folders: synced.append(set(folders)))
    with store.deferred_sync():
        again, _ = stage(store, "task-b", b"the same bytes")
        assert not store.put_if_absent(again, digest, verify_hash=False, synced=True).created
        assert synced == []  # deferred: nothing synced yet...
        store.sync_deferred()
        assert {Path(folder) for folder in synced[0]} == chain  # ...then the dedup's folders with the batch
    synced.clear()
    third, _ = stage(store, "task-c", b"the same bytes")
    assert not store.put_if_absent(third, digest).created  # outside deferred_sync: synced at once
    assert {Path(folder) for folder in synced[0]} == chain

"""What a commit makes durable, seen at the system calls (a power cut cannot be staged in a
test; the fsyncs are what survive one): the blob's bytes before its link, the folders whose
entries changed before the commit (or the deferred block) returns, and no descriptor left
open. Also ensure() and the health probe on a store that is new or half made."""
from __future__ import annotations

import gc
import hashlib
import io
import os
import sys
from pathlib import Path

import pytest

import media_crawler.store.cas as cas
from media_crawler.store.cas import FilesystemBlobStore


def stage(store: FilesystemBlobStore, name: str, data: bytes):
    part = store.staging_path(name)
    part.write_bytes(data)
    return part, hashlib.sha256(data).hexdigest()


def open_descriptors() -> int:
    # Garbage of earlier tests (a ledger's SQLite connections) is collected first: a
    # collection inside the measured block closed their descriptors there.
    gc.collect()
    return len(os.listdir("/proc/self/fd"))


class Synced(list):
    def __init__(self) -> None:
        super().__init__()
        self.sizes: dict[str, int] = {}


@pytest.fixture
def fsynced(monkeypatch):
    """The paths fsync(2) was called on, in order (a file by its name at the time);
    `.sizes`: each one's length when it was synced (what the sync made durable)."""
    paths = Synced()
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        paths.append(path)
        paths.sizes[path] = os.fstat(fd).st_size
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return paths


class FakeLibc:
    """A C library whose syncfs answers `answer` (-1: the call failed), or has none."""

    def __init__(self, answer: int | None) -> None:
        self.calls = 0
        if answer is not None:
            def syncfs(_fd: int) -> int:
                self.calls += 1
                return answer
            self.syncfs = syncfs


def test_a_commit_syncs_the_bytes_before_the_link_and_the_folder_after_and_keeps_no_descriptor(tmp_path, fsynced):
    store = FilesystemBlobStore(tmp_path).ensure()
    part, digest = stage(store, "task-1", b"unsynced bytes")
    fsynced.clear()
    before = open_descriptors()
    store.put_if_absent(part, digest)
    target = store.path_for(digest)
    # The staged file is fsynced under its staging name (before the link), then the folders.
    assert fsynced[0] == str(part) and fsynced.sizes[str(part)] == len(b"unsynced bytes")
    assert str(target.parent) in fsynced[1:]
    assert open_descriptors() == before


def test_a_deferred_block_syncs_its_folders_once_at_its_end_and_keeps_staged_names_until_then(tmp_path, fsynced):
    if not sys.platform.startswith("linux"):
        pytest.skip("syncfs(2) is Linux's")  # elsewhere: the per-folder fallback, tested below
    store = FilesystemBlobStore(tmp_path).ensure()
    parts = [stage(store, f"task-{n}", f"blob {n}".encode()) for n in range(3)]
    fsynced.clear()
    before = open_descriptors()
    with store.deferred_sync():
        with store.deferred_sync():  # nested: the outer block flushes
            for part, digest in parts:
                store.put_if_absent(part, digest, verify_hash=False, synced=True)
        assert fsynced == [], "no folder is synced inside the block"
        assert all(part.exists() for part, _ in parts), "a staged name goes only after its link is durable"
    # One syncfs(2) of the store's filesystem for the whole block: no folder fsynced one by one.
    assert fsynced == []
    assert not any(part.exists() for part, _ in parts)
    assert all(store.exists(digest) for _, digest in parts)
    assert open_descriptors() == before


@pytest.mark.parametrize("answer", [None, -1], ids=["no syncfs", "syncfs failed"])
def test_without_a_working_syncfs_each_changed_folder_is_fsynced(tmp_path, fsynced, monkeypatch, answer):
    libc = FakeLibc(answer)
    monkeypatch.setattr(cas, "_libc", lambda: libc)
    store = FilesystemBlobStore(tmp_path).ensure()
    parts = [stage(store, f"task-{n}", f"blob {n}".encode()) for n in range(2)]
    fsynced.clear()
    before = open_descriptors()
    with store.deferred_sync():
        for part, digest in parts:
            store.put_if_absent(part, digest, verify_hash=False, synced=True)
    blobs = tmp_path / "sha256"
    for _, digest in parts:
        for folder in (blobs / digest[:2] / digest[2:4], blobs / digest[:2], blobs):
            assert str(folder) in fsynced
    assert libc.calls == (1 if answer is not None else 0)
    assert open_descriptors() == before


def test_an_empty_deferred_block_syncs_nothing(tmp_path, fsynced, monkeypatch):
    libc = FakeLibc(0)
    monkeypatch.setattr(cas, "_libc", lambda: libc)
    store = FilesystemBlobStore(tmp_path).ensure()
    fsynced.clear()
    with store.deferred_sync():
        pass
    assert fsynced == [] and libc.calls == 0


@pytest.mark.parametrize("present", [(), ("sha256",), ("staging",), ("sha256", "staging")])
def test_ensure_completes_a_new_or_half_made_store(tmp_path, present):
    root = tmp_path / "not" / "yet"
    for name in present:
        (root / name).mkdir(parents=True)
    store = FilesystemBlobStore(root).ensure()
    assert (root / "sha256").is_dir() and (root / "staging").is_dir()
    part, digest = stage(store, "task-1", b"bytes")
    assert store.put_if_absent(part, digest).created


def test_the_health_probe_writes_in_staging_of_a_new_store_and_leaves_nothing(tmp_path, fsynced):
    """The probe must reach the disk (written and fsynced), or a full or read-only disk passes it."""
    store = FilesystemBlobStore(tmp_path / "new" / "store")
    for _ in range(2):
        fsynced.clear()
        assert store.probe_writable() == str(tmp_path / "new" / "store" / "staging")
        [probe] = fsynced
        assert probe.startswith(str(store.staging)) and fsynced.sizes[probe] > 0
        assert list(store.staging.iterdir()) == []


def test_a_streamed_blob_is_synced_whole_before_its_link(tmp_path, fsynced):
    store = FilesystemBlobStore(tmp_path).ensure()
    fsynced.clear()
    stored = store.put_stream_if_absent(io.BytesIO(b"streamed bytes"))
    [staged] = [path for path in fsynced if path.startswith(str(store.staging))]
    assert fsynced.sizes[staged] == len(b"streamed bytes") and store.exists(stored.sha256)


def test_only_files_named_by_a_hash_are_listed(tmp_path):
    store = FilesystemBlobStore(tmp_path).ensure()
    part, digest = stage(store, "task-1", b"a blob")
    store.put_if_absent(part, digest)
    folder = store.path_for(digest).parent
    (folder / f"{digest}~").write_bytes(b"an editor's backup")
    (folder / hashlib.sha256(b"a folder").hexdigest()).mkdir()
    assert list(store.iter_sha256s()) == [digest]


def test_quarantined_blobs_are_kept_aside_one_by_one(tmp_path):
    store = FilesystemBlobStore(tmp_path).ensure()
    kept = []
    for data in (b"first bad", b"second bad"):
        part, digest = stage(store, "task-1", data)
        store.put_if_absent(part, digest)
        kept.append(store.quarantine(digest))
    assert [Path(path).read_bytes() for path in kept] == [b"first bad", b"second bad"]
    assert list(store.iter_sha256s()) == []


def test_a_staged_file_linked_elsewhere_is_no_blob_without_the_blob(tmp_path):
    """Two links, a hint, but no blob of that name: not stored."""
    store = FilesystemBlobStore(tmp_path).ensure()
    part, digest = stage(store, "task-1", b"linked elsewhere")
    os.link(part, tmp_path / "elsewhere")
    assert store.stored_name_of(part, [digest]) is None
    assert store.stored_name_of(part, [digest], may_hash=False) is None


def test_a_folder_in_staging_is_no_blobs_second_name(tmp_path):
    store = FilesystemBlobStore(tmp_path).ensure()
    folder = store.staging_path("task-1")
    folder.mkdir()  # a directory has two links (its name and its "."), as a linked blob has
    assert store.stored_name_of(folder) is None


def test_a_failed_health_probe_says_why_it_failed(tmp_path, monkeypatch):
    """A full disk is reported as ENOSPC, not as the probe file that was never made."""
    import errno

    def no_space(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    import media_crawler.store.blob_store as blob_store

    store = FilesystemBlobStore(tmp_path).ensure()
    # The probe's own open() (store/blob_store.py probe_local_folder), not every open in the process.
    monkeypatch.setattr(blob_store, "open", no_space, raising=False)
    with pytest.raises(OSError) as info:
        store.probe_writable()
    assert info.value.errno == errno.ENOSPC


def test_a_streamed_blob_keeps_its_staged_name_until_the_deferred_block_ends(tmp_path):
    store = FilesystemBlobStore(tmp_path).ensure()
    with store.deferred_sync():
        stored = store.put_stream_if_absent(io.BytesIO(b"streamed in a block"))
        assert len(list(store.iter_parts())) == 1, "dropped only once the link is durable"
    assert list(store.iter_parts()) == [] and store.exists(stored.sha256)


def test_hints_that_are_not_hashes_are_passed_over(tmp_path):
    store = FilesystemBlobStore(tmp_path).ensure()
    part, digest = stage(store, "task-1", b"a blob")
    os.link(part, tmp_path / "kept")
    store.put_if_absent(tmp_path / "kept", digest)  # the blob is now part's other name
    assert store.stored_name_of(part, [None, "", "../../etc/passwd", digest.upper()], may_hash=False) == digest

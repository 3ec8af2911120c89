"""Both stores keep the BlobStore protocol (store/blob_store.py): the filesystem store, and
the S3 store against a real S3 server (SeaweedFS, media_crawler_tests/seaweedfs.py)."""
from __future__ import annotations

import hashlib
import io

import pytest

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.store.blob_store import BlobStore, StoredBlob, rehash
from media_crawler.store.cas import FilesystemBlobStore


@pytest.fixture(params=["filesystem", "s3"])
def store(request, tmp_path) -> BlobStore:
    if request.param == "filesystem":
        return FilesystemBlobStore(tmp_path / "store").ensure()
    return s3_store(request.getfixturevalue("s3_server"), tmp_path / "local")


def s3_store(server, local_root):
    from media_crawler.store.s3.blob_store import S3BlobStore
    from media_crawler.store.s3.settings import parse_uri

    return S3BlobStore(server.client(), parse_uri(server.new_uri()), local_root).ensure()


def staged(store: BlobStore, name: str, data: bytes):
    path = store.staging_path(name)
    path.write_bytes(data)
    return path


def test_the_store_is_a_blob_store(store):
    assert isinstance(store, BlobStore)
    missing = [name for name in ("put_if_absent", "put_stream_if_absent", "exists", "size", "open", "local_file",
                                 "location", "iter_sha256s", "quarantine", "deferred_sync", "sync_deferred", "free_bytes",
                                 "staging_path", "iter_parts", "stored_name_of")
               if getattr(type(store), name) is getattr(BlobStore, name)]
    assert missing == [], "implemented, not inherited from the protocol's empty bodies"


def test_put_twice_keeps_one_blob_and_reads_back_the_bytes(store):
    data = b"the same bytes, downloaded twice"
    digest = hashlib.sha256(data).hexdigest()
    first = store.put_if_absent(staged(store, "task-1", data), digest)
    second = store.put_if_absent(staged(store, "task-2", data), digest)
    assert first == StoredBlob(digest, len(data), created=True)
    assert second == StoredBlob(digest, len(data), created=False)
    assert list(store.iter_sha256s()) == [digest] and list(store.iter_parts()) == []
    assert store.exists(digest) and store.size(digest) == len(data)
    with store.open(digest) as stream:
        assert stream.read() == data
    with store.local_file(digest) as path:
        assert path.read_bytes() == data
    assert rehash(store, digest) == digest
    assert digest in store.location(digest)


def test_put_from_a_stream_is_put_if_absent_too(store):
    data = b"streamed in"
    digest = hashlib.sha256(data).hexdigest()
    assert store.put_stream_if_absent(io.BytesIO(data)) == StoredBlob(digest, len(data), created=True)
    assert store.put_stream_if_absent(io.BytesIO(data), digest).created is False
    with pytest.raises(CrawlError) as raised:
        store.put_stream_if_absent(io.BytesIO(b"other bytes"), digest)
    assert raised.value.error_class is ErrorClass.HASH_MISMATCH
    assert list(store.iter_sha256s()) == [digest] and list(store.iter_parts()) == []


def test_an_absent_blob_is_absent_everywhere(store):
    digest = hashlib.sha256(b"never stored").hexdigest()
    assert not store.exists(digest) and list(store.iter_sha256s()) == []
    with pytest.raises(FileNotFoundError):
        store.open(digest)
    with pytest.raises(FileNotFoundError):
        with store.local_file(digest):
            pass


def test_a_quarantined_blob_leaves_the_store_and_can_be_stored_again(store):
    data = b"rotten"
    digest = store.put_stream_if_absent(io.BytesIO(data)).sha256
    where = store.quarantine(digest)
    assert not store.exists(digest) and list(store.iter_sha256s()) == [] and digest in where
    assert store.put_stream_if_absent(io.BytesIO(data)).created


def test_a_staged_file_that_is_a_blobs_second_name_is_recognised(store, tmp_path):
    import os

    if not isinstance(store, FilesystemBlobStore):
        copy = staged(store, "task-8", b"copied on put")
        assert store.stored_name_of(copy, [hashlib.sha256(b"copied on put").hexdigest()]) is None
        return  # a store that copies on put has no second names

    data = b"linked"
    digest = store.put_stream_if_absent(io.BytesIO(data)).sha256
    with store.local_file(digest) as blob:
        os.link(blob, store.staging_path("task-7"))
    copy = staged(store, "task-8", data)
    assert store.stored_name_of(store.staging_path("task-7"), [digest]) == digest
    assert store.stored_name_of(store.staging_path("task-7")) == digest, "found by hashing"
    assert store.stored_name_of(store.staging_path("task-7"), may_hash=False) is None
    assert store.stored_name_of(copy, [digest]) is None, "a copy is no second name"


def test_puts_inside_deferred_sync_are_whole_and_their_staged_names_go_when_it_ends(store):
    with store.deferred_sync():
        first = store.put_stream_if_absent(io.BytesIO(b"batched one"))
        again = store.put_stream_if_absent(io.BytesIO(b"batched one"))
        store.put_stream_if_absent(io.BytesIO(b"batched two"))
        assert store.exists(first.sha256) and not again.created
    assert len(list(store.iter_sha256s())) == 2 and list(store.iter_parts()) == []


def test_sync_deferred_flushes_the_puts_so_far_and_the_block_goes_on_deferring(store):
    # The filesystem store keeps a put's staged file until the flush that makes its link
    # durable; an object store's put is durable when the server confirms it, so nothing waits.
    waits = [["one.part"], ["two.part"]] if isinstance(store, FilesystemBlobStore) else [[], []]
    with store.deferred_sync():
        store.put_if_absent(staged(store, "one", b"first batch"), hashlib.sha256(b"first batch").hexdigest())
        assert [path.name for path in store.iter_parts()] == waits[0], "kept until the flush"
        store.sync_deferred()
        assert list(store.iter_parts()) == []
        store.put_if_absent(staged(store, "two", b"second batch"), hashlib.sha256(b"second batch").hexdigest())
        assert [path.name for path in store.iter_parts()] == waits[1], "still deferring after a flush"
    assert len(list(store.iter_sha256s())) == 2 and list(store.iter_parts()) == []
    store.sync_deferred()  # outside the block: nothing to do


def test_a_released_blob_is_gone_and_free_to_be_stored_again(store):
    """ReleasableBlobs (the answer store's, store/answer_release.py): both stores delete."""
    from media_crawler.store.blob_store import ReleasableBlobs

    assert isinstance(store, ReleasableBlobs)
    kept, released = (store.put_stream_if_absent(io.BytesIO(data)).sha256 for data in (b"kept", b"released"))
    store.release(released)
    assert not store.exists(released) and list(store.iter_sha256s()) == [kept]
    with pytest.raises(FileNotFoundError):
        store.open(released)
    store.release(released)  # gone already: no error
    assert store.put_stream_if_absent(io.BytesIO(b"released")).created
    assert sorted(store.iter_sha256s()) == sorted([kept, released])

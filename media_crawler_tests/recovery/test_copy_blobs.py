"""copy_blobs (recovery/copying.py): a backup's blobs are put through the target's BlobStore."""
from __future__ import annotations

import hashlib
import io

from media_crawler.recovery.copying import copy_blobs
from media_crawler.store.cas import FilesystemBlobStore


def test_copies_new_blobs_once_skips_corrupt_ones_and_replaces_a_wrong_sized_copy(tmp_path):
    source = FilesystemBlobStore(tmp_path / "live").ensure()
    target = FilesystemBlobStore(tmp_path / "backup").ensure()
    good, rotten, short = (source.put_stream_if_absent(io.BytesIO(data)).sha256
                           for data in (b"good bytes", b"rotten bytes", b"bytes cut short"))
    source.path_for(rotten).write_bytes(b"rotted on disk")  # the filesystem store's layout: test only

    first = copy_blobs(source, target)
    assert (first.copied, first.already_there, first.corrupt) == (2, 0, [rotten])
    assert first.bytes == len(b"good bytes") + len(b"bytes cut short")
    assert sorted(target.iter_sha256s()) == sorted([good, short]) and list(target.iter_parts()) == []

    target.path_for(short).write_bytes(b"bytes")  # a backup copy that lost its tail
    second = copy_blobs(source, target)
    assert (second.copied, second.already_there) == (1, 1)
    with target.open(short) as stream:
        assert hashlib.sha256(stream.read()).hexdigest() == short
    assert [path.read_bytes() for path in (tmp_path / "backup" / "quarantine").iterdir()] == [b"bytes"]

"""What the crawler asks of the place its blobs are kept: the BlobStore protocol.

A blob is named by the sha256 of its bytes and is either absent or whole. The
crawler names blobs only by that hash: where and how they are kept (a folder
tree on a local or shared filesystem, or an S3 bucket) is the store's own
knowledge, so no path of a blob is built or passed around outside store/
(media_crawler_tests/test_architecture.py checks this).

Two kinds of local files remain part of the surface, because the tools that
make bytes need files:

- staging: a download (or a mux) writes its bytes to `staging_path(name)`, a
  local file, and hands it to `put_if_absent`. An object store keeps a local
  staging folder too and uploads on put.
- lending: ffmpeg reads files, so `local_file(sha256)` lends a readable path
  for the length of a `with` block: the blob itself on a filesystem, a
  temporary download from an object store.

The implementations are store/cas.py `FilesystemBlobStore` and store/s3/
`S3BlobStore`; `open_blob_store` (store/open_store.py) is the one place that chooses.
A store whose puts can leave invisible leftovers (multipart uploads) also keeps
`UnfinishedUploads`, for reconcile; one whose blobs may be deleted keeps `ReleasableBlobs`
(the answer store, for `compact --answers-older-than`: never the media store).
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import BinaryIO, ContextManager, Iterable, Iterator, Protocol, runtime_checkable
from media_crawler.models import item_record

CHUNK = 1024 * 1024


@item_record
class StoredBlob:
    """What a put did: the blob's name and size, and whether this put stored it."""
    sha256: str
    size: int
    created: bool  # False: the content was already stored (dedup, a concurrent writer, a re-run)


@runtime_checkable
class BlobStore(Protocol):
    # -- blobs ----------------------------------------------------------------------
    def put_if_absent(self, staged: Path, sha256: str, *, verify_hash: bool = True, synced: bool = False,
                      size: int | None = None) -> StoredBlob:
        """Store the staged file's bytes as blob `sha256` unless that blob exists; the staged
        name is consumed either way. verify_hash=False: the caller hashed the very bytes it
        wrote. synced=True: the caller fsynced them. size: their length, when known.
        Raises CrawlError (HASH_MISMATCH, DISK_FULL, STORAGE_ERROR)."""

    def put_stream_if_absent(self, stream: BinaryIO, sha256: str | None = None) -> StoredBlob:
        """Store the bytes read from `stream` (staged and hashed on the way). sha256: the
        name they must hash to (HASH_MISMATCH otherwise); None names them by their hash."""

    def exists(self, sha256: str) -> bool:
        """The blob is stored whole."""

    def size(self, sha256: str) -> int:
        """The stored blob's length in bytes (FileNotFoundError when absent)."""

    def open(self, sha256: str) -> BinaryIO:
        """The blob's bytes, for reading (FileNotFoundError when absent)."""

    def local_file(self, sha256: str) -> ContextManager[Path]:
        """A local file holding the blob's bytes, readable until the block ends; never write to it."""

    def location(self, sha256: str) -> str:
        """Where the blob is, for people and manifests (a path or a URI); not to be opened by callers."""

    def iter_sha256s(self) -> Iterator[str]:
        """The names of the stored blobs (anything else kept beside them is not listed)."""

    def quarantine(self, sha256: str) -> str:
        """Move a blob that failed its check out of the store, kept for a person to look at;
        returns where it went (a location). The name is free to be stored again."""

    def deferred_sync(self) -> ContextManager["BlobStore"]:
        """Puts inside the block are durable when it ends (one flush for the batch)."""

    def sync_deferred(self) -> None:
        """Inside deferred_sync(): make the puts so far durable now, and go on deferring."""

    def free_bytes(self) -> int:
        """Room left for new blobs and staged files, in bytes."""

    def probe_writable(self) -> str:
        """Write, fsync and delete a probe where the store writes (readiness); returns where.
        Raises OSError when that fails."""

    # -- staging: local files on their way in --------------------------------------
    def staging_path(self, name: str) -> Path:
        """The local file a download or mux named `name` (from ledger ids) writes to."""

    def iter_parts(self) -> Iterator[Path]:
        """The staged files present now."""

    def stored_name_of(self, staged: Path, hints: Iterable[str | None] = (), *,
                       may_hash: bool = True) -> str | None:
        """The blob a staged file is another name of (a crash between a put's link and its
        unlink leaves one), or None. hints: hashes it probably has; may_hash: with none of
        them right, hash the file to find out. A store that copies on put answers None."""


@runtime_checkable
class UnfinishedUploads(Protocol):
    """A store whose puts can leave invisible, costly leftovers when a worker is killed
    mid-put (an object store's multipart uploads): reconcile lists and aborts them. A
    filesystem store's leftovers are staged files, which `iter_parts` lists already."""

    def unfinished_uploads(self, older_than_s: float = 0.0) -> list[tuple[str, str]]:
        """(where, upload id) of the uploads begun more than `older_than_s` ago and never finished."""

    def abort_upload(self, where: str, upload_id: str) -> None:
        """Drop an unfinished upload (gone already: no error)."""


@runtime_checkable
class ReleasableBlobs(Protocol):
    """Deleting a blob: for the answer store only (store/answer_release.py is the one caller,
    media_crawler_tests/test_architecture.py checks it). Media blobs are never deleted: the
    ledger's seen-set says an item is had for good, so a deleted media blob would be lost
    without being fetched again (its signed URL expires, and `compact` releases it), and
    committed rows, revisits and restores all name a media blob for as long as the ledger
    lives. A kept answer is only a record of how the media were listed, named by its rows
    alone: once no row names it, nothing can."""

    def release(self, sha256: str) -> None:
        """Delete blob `sha256` (gone already: no error)."""


@runtime_checkable
class RecordedChecksums(Protocol):
    """A store whose server checked each blob's sha256 when it was written and keeps the
    record (an object store's x-amz-checksum-sha256 and metadata): a blob is checked by
    asking for that record, not by reading the bytes back."""

    def recorded_problem(self, sha256: str, size: int | None = None) -> str | None:
        """None when blob `sha256` is stored with `size` bytes (when given) and a recorded
        sha256 equal to its name; else "missing", "size" or "hash". A blob with no record
        is re-hashed."""


def stream_sha256(stream: BinaryIO) -> str:
    digest = hashlib.sha256()
    while chunk := stream.read(CHUNK):
        digest.update(chunk)
    return digest.hexdigest()


def rehash(store: BlobStore, sha256: str) -> str:
    """The sha256 of the stored bytes of blob `sha256` now (equal to it unless they rotted)."""
    with store.open(sha256) as stream:
        return stream_sha256(stream)


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a local file (a staged one: blobs are read through their store)."""
    with open(path, "rb") as stream:
        return stream_sha256(stream)


def probe_local_folder(folder: Path, name: str) -> None:
    """Write, fsync and delete `.health-<name>` in `folder` (made if missing): readiness of
    the local disk a store stages on. Raises OSError when any step fails."""
    folder.mkdir(parents=True, exist_ok=True)
    probe = folder / f".health-{name}"
    try:
        with open(probe, "wb") as handle:
            handle.write(b"ok")
            handle.flush()
            os.fsync(handle.fileno())
    finally:
        probe.unlink(missing_ok=True)

"""The BlobStore (store/blob_store.py) on S3 or an S3-compatible server.

Keys are the filesystem's layout under the URI's prefix:
    PREFIX/sha256/<aa>/<bb>/<sha256-hex>      committed blobs, named by the hash of their bytes
    PREFIX/quarantine/<sha256-hex>.<time>     blobs that failed a check
Staging stays on local disk (STAGING under the local root), where the disk guard bounds it.

A commit is a put-if-absent of a staged local file (transfer.upload_file: one PutObject,
or a multipart upload above MULTIPART_THRESHOLD, each with `If-None-Match: *` and checked
against the bytes' sha256).
An upload that never completes is invisible: a worker killed mid-upload leaves no object,
and `reconcile --repair` aborts what it left (`abort_unfinished_uploads`).
412 means the name is taken: a HEAD then checks that the object there has the staged
file's size and hash before the put answers "already stored" (dedup, a concurrent writer,
a re-run after a crash). The staged file is removed only once the object is confirmed.
"""
from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import socket
import tempfile
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.store.blob_store import CHUNK, BlobStore, StoredBlob, probe_local_folder, rehash
from media_crawler.store.free_space import FreeSpace
from media_crawler.store.s3.client import Head, S3Client, S3Error, S3Unreachable, checksum_b64
from media_crawler.store.s3.settings import BucketUri, connection_from_environment, parse_uri
from media_crawler.store.s3.transfer import MAX_PARTS, MULTIPART_THRESHOLD, SHA256_META, abort_quietly, upload_file

BLOBS, STAGING, QUARANTINE, HEALTH = "sha256", "staging", "quarantine", ".health"
CONFLICT_ATTEMPTS = 4  # 409 ConditionalRequestConflict: a concurrent conditional write; start again
LENT_PREFIX = ".lent-"  # .lent-<pid>-<host>-<random>: local_file's temporary copies
_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]  # no '-' in it
COPY_LIMIT = 5 * 1024**3  # S3's CopyObject copies up to 5 GiB; above, UploadPartCopy
COPY_PART_SIZE = 512 * 1024**2  # a copied part (5 MiB to 5 GiB); at most MAX_PARTS of them
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


class S3BlobStore(BlobStore):
    def __init__(self, client: S3Client, uri: BucketUri, local_root: str | os.PathLike) -> None:
        self.client = client
        self.bucket, self.prefix = uri.bucket, uri.prefix
        self.uri = uri
        self.local_root = Path(local_root)
        self.staging = self.local_root / STAGING
        self._free_space = FreeSpace(self.local_root)

    @classmethod
    def from_uri(cls, uri: str, local_root: str | os.PathLike) -> "S3BlobStore":
        connection = connection_from_environment()
        return cls(S3Client(connection.endpoint, connection.region, connection.credentials), parse_uri(uri),
                   local_root)

    def ensure(self) -> "S3BlobStore":
        """Check the bucket answers to our keys (one line naming what is wrong, before any
        download), and make the local staging folder."""
        try:
            self.client.head_bucket(self.bucket, self._key(BLOBS) + "/")
        except (S3Error, S3Unreachable) as exc:
            raise self._error(exc, "open the store") from None
        self.staging.mkdir(parents=True, exist_ok=True)
        self.sweep_lent_copies()
        return self

    # -- names ------------------------------------------------------------------------
    def key_for(self, sha256: str) -> str:
        sha256 = sha256.lower()
        if not _SHA256_HEX.fullmatch(sha256):
            raise ValueError(f"not a sha256 hex digest: {sha256!r}")
        return self._key(BLOBS, sha256[:2], sha256[2:4], sha256)

    def _key(self, *parts: str) -> str:
        return "/".join([self.prefix, *parts] if self.prefix else parts)

    def location(self, sha256: str) -> str:
        return f"s3://{self.bucket}/{self.key_for(sha256)}"

    def staging_path(self, name: str) -> Path:
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"bad staging name {name!r}")
        return self.staging / f"{name}.part"

    def iter_parts(self) -> Iterator[Path]:
        if self.staging.is_dir():
            yield from self.staging.glob("*.part")

    def stored_name_of(self, staged: Path, hints: Iterable[str | None] = (), *, may_hash: bool = True) -> str | None:
        """A put uploads a copy: a staged file is never another name of a blob."""
        return None

    # -- reads ------------------------------------------------------------------------
    def _head(self, sha256: str) -> Head | None:
        try:
            return self.client.head_object(self.bucket, self.key_for(sha256))
        except (S3Error, S3Unreachable) as exc:
            raise self._error(exc, "read") from None

    def exists(self, sha256: str) -> bool:
        return self._head(sha256) is not None

    def size(self, sha256: str) -> int:
        head = self._head(sha256)
        if head is None:
            raise FileNotFoundError(2, "blob not in the store", self.location(sha256))
        return head.size

    def open(self, sha256: str) -> BinaryIO:
        try:
            response = self.client.get_object(self.bucket, self.key_for(sha256))
        except S3Error as exc:
            if exc.status == 404:
                raise FileNotFoundError(2, "blob not in the store", self.location(sha256)) from None
            raise self._error(exc, "read") from None
        except S3Unreachable as exc:
            raise self._error(exc, "read") from None
        return _ObjectStream(response, self.location(sha256))

    @contextmanager
    def local_file(self, sha256: str) -> Iterator[Path]:
        """A temporary copy in the staging folder (never named *.part: not a download),
        removed when the block ends, however it ends (a cut download, ffmpeg failing).
        Its name holds this process's id and machine: a killed process's copies are swept
        by the next `ensure` on this machine (sweep_lent_copies)."""
        self.staging.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=f"{LENT_PREFIX}{os.getpid()}-{_HOST}-", dir=self.staging)
        path = Path(name)
        try:
            with os.fdopen(handle, "wb") as out, self.open(sha256) as stream:
                shutil.copyfileobj(stream, out, CHUNK)
            yield path
        finally:
            path.unlink(missing_ok=True)

    def sweep_lent_copies(self) -> list[Path]:
        """Remove this machine's lent copies whose process is gone (killed inside a
        `local_file` block). A live process's copies stay, whatever their age (ffmpeg may
        be reading them), and so do another machine's (a staging folder on a shared disk)."""
        removed = []
        for path in self.staging.glob(f"{LENT_PREFIX}*") if self.staging.is_dir() else ():
            owner, host = (path.name[len(LENT_PREFIX):].split("-") + ["", ""])[:2]
            if host == _HOST and owner.isdigit() and not _process_alive(int(owner)):
                path.unlink(missing_ok=True)
                removed.append(path)
        return removed

    def iter_sha256s(self) -> Iterator[str]:
        folder = self._key(BLOBS) + "/"
        try:
            for key, _size in self.client.list_keys(self.bucket, folder):
                name = key[len(folder):]
                # Only names in the layout (aa/bb/<hex>): anything else is not ours to list.
                if _SHA256_HEX.fullmatch(name[6:]) and name[:2] == name[6:8] and name[3:5] == name[8:10]:
                    yield name[6:]
        except (S3Error, S3Unreachable) as exc:
            raise self._error(exc, "list") from None

    # -- writes -----------------------------------------------------------------------
    def put_if_absent(self, staged: Path, sha256: str, *, verify_hash: bool = True, synced: bool = False,
                      size: int | None = None) -> StoredBlob:
        """Upload the staged file put-if-absent (the module docstring); `synced` does not
        matter here (the bytes are read, not linked). With verify_hash=False the local hash
        is skipped for a single PUT: the server checks the checksum it is sent."""
        sha256 = sha256.lower()
        key = self.key_for(sha256)
        try:
            if not staged.exists():
                # A crash after the upload and its staged file's removal, before the ledger
                # heard: the object is the commit (as a filesystem store's link would be).
                head = self.client.head_object(self.bucket, key)
                if head is not None and head.metadata.get(SHA256_META, sha256) == sha256:
                    return StoredBlob(sha256, head.size, created=False)
            if size is None:
                size = staged.stat().st_size
            for attempt in range(1, CONFLICT_ATTEMPTS + 1):
                try:
                    if size > MULTIPART_THRESHOLD and self.client.head_object(self.bucket, key) is not None:
                        created = False  # stored already: no need to send gigabytes to hear 412
                    else:
                        created = upload_file(self.client, self.bucket, key, staged, sha256, size,
                                              verify_hash=verify_hash)
                    break
                except S3Error as exc:
                    if exc.status != 409 or attempt == CONFLICT_ATTEMPTS:
                        raise
            if not created:
                self._check_stored(key, sha256, size)
        except (S3Error, S3Unreachable) as exc:
            raise self._error(exc, "commit") from None
        except OSError as exc:
            full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
            raise CrawlError(ErrorClass.DISK_FULL if full else ErrorClass.STORAGE_ERROR,
                             f"commit: {exc.strerror or exc}") from None
        staged.unlink(missing_ok=True)
        return StoredBlob(sha256, size, created=created)

    def recorded_problem(self, sha256: str, size: int | None = None) -> str | None:
        """One HEAD: present, of `size` bytes, its recorded sha256 (our metadata, and the
        single PUT's checksum the server verified on upload) equal to its name. An object
        with neither record (not written by this store) is read back and hashed."""
        sha256 = sha256.lower()
        head = self._head(sha256)
        if head is None:
            return "missing"
        if size is not None and head.size != size:
            return "size"
        recorded = head.metadata.get(SHA256_META)
        checksum = head.checksum_sha256 if head.checksum_sha256 and "-" not in head.checksum_sha256 else None
        if recorded is None and checksum is None:
            return None if rehash(self, sha256) == sha256 else "hash"
        if (recorded is not None and recorded != sha256) or (
                checksum is not None and checksum != checksum_b64(bytes.fromhex(sha256))):
            return "hash"
        return None

    def _check_stored(self, key: str, sha256: str, size: int) -> None:
        """The object under our name is the staged file's bytes: its size, and its sha256
        where the server kept one (our metadata, or the single PUT's checksum)."""
        head = self.client.head_object(self.bucket, key)
        where = f"s3://{self.bucket}/{key}"
        if head is None:
            raise CrawlError(ErrorClass.STORAGE_ERROR, f"commit: {where} answered 'exists' and then was gone")
        recorded = head.metadata.get(SHA256_META)
        checksum = head.checksum_sha256 if head.checksum_sha256 and "-" not in head.checksum_sha256 else None
        if head.size != size or (recorded and recorded != sha256) or (
                checksum and checksum != checksum_b64(bytes.fromhex(sha256))):
            raise CrawlError(ErrorClass.STORAGE_ERROR, f"commit: {where} holds other bytes than its name says "
                                                       f"({head.size} bytes); reconcile --verify-hashes checks it")

    def put_stream_if_absent(self, stream: BinaryIO, sha256: str | None = None) -> StoredBlob:
        self.staging.mkdir(parents=True, exist_ok=True)
        staged = self.staging_path(f"stream-{os.getpid()}-{time.monotonic_ns()}")
        try:
            digest, size = hashlib.sha256(), 0
            with open(staged, "wb") as out:
                while chunk := stream.read(CHUNK):
                    digest.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
            if sha256 is not None and digest.hexdigest() != sha256.lower():
                raise CrawlError(ErrorClass.HASH_MISMATCH, "streamed bytes do not hash to the expected name")
            return self.put_if_absent(staged, digest.hexdigest(), verify_hash=False, size=size)
        except OSError as exc:
            raise CrawlError(ErrorClass.STORAGE_ERROR, f"put: {exc.strerror or exc}") from None
        finally:
            staged.unlink(missing_ok=True)

    def quarantine(self, sha256: str) -> str:
        """Copied aside, then deleted from its name (S3 has no rename). S3's CopyObject
        copies at most COPY_LIMIT bytes: a larger object is copied part by part
        (UploadPartCopy, within the server), its metadata kept."""
        key = self.key_for(sha256)
        target = self._key(QUARANTINE, f"{sha256}.{int(time.time())}")
        try:
            head = self.client.head_object(self.bucket, key)
            if head is None:
                raise FileNotFoundError(2, "blob not in the store", self.location(sha256))
            if head.size > COPY_LIMIT:
                self._copy_in_parts(key, target, head)
            else:
                self.client.copy_object(self.bucket, key, target)
            self.client.delete_object(self.bucket, key)
        except (S3Error, S3Unreachable) as exc:
            raise self._error(exc, "quarantine") from None
        return f"s3://{self.bucket}/{target}"

    def release(self, sha256: str) -> None:
        """ReleasableBlobs (the answer store only): DeleteObject, which answers 204 whether
        or not the object was there."""
        try:
            self.client.delete_object(self.bucket, self.key_for(sha256))
        except (S3Error, S3Unreachable) as exc:
            raise self._error(exc, "release") from None

    def _copy_in_parts(self, key: str, target: str, head: Head) -> None:
        metadata = {f"x-amz-meta-{name}": value for name, value in head.metadata.items()}
        upload_id = self.client.create_multipart(self.bucket, target, metadata, checksums=False)
        try:
            part_size = max(COPY_PART_SIZE, -(-head.size // MAX_PARTS))
            parts = []
            for number, first in enumerate(range(0, head.size, part_size), start=1):
                last = min(first + part_size, head.size) - 1
                parts.append((number, self.client.upload_part_copy(self.bucket, target, upload_id, number, key,
                                                                   first, last), None))
            self.client.complete_multipart(self.bucket, target, upload_id, parts)
            upload_id = None
        finally:
            if upload_id is not None:
                abort_quietly(self.client, self.bucket, target, upload_id)

    @contextmanager
    def deferred_sync(self):
        """An upload is durable when the server confirms it: nothing to defer."""
        yield self

    def sync_deferred(self) -> None:
        """Nothing is ever deferred (see deferred_sync)."""

    # -- unfinished uploads (reconcile) -------------------------------------------------
    def unfinished_uploads(self, older_than_s: float = 0.0) -> list[tuple[str, str]]:
        """(key, upload id) of the multipart uploads under the prefix begun more than
        `older_than_s` ago: a killed worker's, invisible and costing until aborted."""
        now = datetime.now(timezone.utc)
        found = []
        try:
            for key, upload_id, initiated in self.client.list_multipart(self.bucket, self._key(BLOBS) + "/"):
                try:
                    begun = datetime.fromisoformat(initiated.replace("Z", "+00:00"))
                except ValueError:
                    begun = now
                if (now - begun).total_seconds() >= older_than_s:
                    found.append((key, upload_id))
        except (S3Error, S3Unreachable) as exc:
            raise self._error(exc, "list uploads") from None
        return found

    def abort_upload(self, where: str, upload_id: str) -> None:
        try:
            self.client.abort_multipart(self.bucket, where, upload_id)
        except (S3Error, S3Unreachable) as exc:
            raise self._error(exc, "abort an upload") from None

    # -- the local side ---------------------------------------------------------------
    def free_bytes(self) -> int:
        """Free bytes where staged files are written (the bucket has no such limit we can read)."""
        return self._free_space.bytes()

    def probe_writable(self) -> str:
        """A local probe in the staging folder, then an object written and deleted in the bucket."""
        name = f"{os.getpid()}-{time.monotonic_ns()}"
        probe_local_folder(self.staging, name)
        key = self._key(HEALTH, name)
        try:
            self.client.put_object(self.bucket, key, b"ok", hashlib.sha256(b"ok").digest())
            self.client.delete_object(self.bucket, key)
        except (S3Error, S3Unreachable) as exc:
            raise OSError(f"{self._error(exc, 'probe').message}") from None
        return f"s3://{self.bucket}/{self._key(HEALTH)}"

    # -- errors -----------------------------------------------------------------------
    def _error(self, exc: Exception, doing: str) -> CrawlError:
        return s3_crawl_error(exc, f"{doing} s3://{self.bucket}")


def _process_alive(pid: int) -> bool:
    """Is there a process `pid` on this machine (staging is local to it)? A pid reused
    since only keeps a stale copy a little longer."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


def s3_crawl_error(exc: Exception, doing: str) -> CrawlError:
    """An S3 failure as the crawler's error classes: throttling is a rate limit, a server
    failure or a lost connection an outage (both retried by the stage), a refusal a
    storage error naming the bucket, bad keys an auth error."""
    if isinstance(exc, CrawlError):
        return exc
    if isinstance(exc, S3Unreachable):
        error_class = (ErrorClass.CONNECTION_REFUSED if exc.refused else
                       ErrorClass.NETWORK_TIMEOUT if exc.timed_out else ErrorClass.CONNECTION_RESET)
        return CrawlError(error_class, f"{doing}: the endpoint does not answer ({exc})")
    assert isinstance(exc, S3Error)
    if exc.status in (429, 503):
        error_class = ErrorClass.RATE_LIMITED
    elif exc.status >= 500:
        error_class = ErrorClass.HTTP_5XX
    elif exc.code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken"):
        error_class = ErrorClass.AUTH
    elif exc.code == "BadDigest":
        error_class = ErrorClass.HASH_MISMATCH
    else:
        error_class = ErrorClass.STORAGE_ERROR
    return CrawlError(error_class, f"{doing}: {exc.status} {exc.code}", http_status=exc.status)


class _ObjectStream:
    """A GET's body as a readable binary stream; closing it releases the connection. A body
    cut short (a reset, a timeout, fewer bytes than announced) is a classified error."""

    def __init__(self, response, where: str) -> None:
        self._response = response
        self._raw = response.raw
        self._where = where

    def read(self, size: int = -1) -> bytes:
        try:
            return self._raw.read(None if size is None or size < 0 else size)
        except Exception as exc:  # urllib3's ProtocolError, ReadTimeoutError, IncompleteRead
            raise CrawlError(ErrorClass.CONNECTION_RESET,
                             f"read {self._where}: the body was cut short ({type(exc).__name__})") from None

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._response.close()

    def __enter__(self) -> "_ObjectStream":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

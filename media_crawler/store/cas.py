"""The content-addressed blob store: a blob is either absent or whole.

Layout under the root:
    sha256/<aa>/<bb>/<sha256-hex>   committed blobs, named by the hash of their bytes
    staging/<name>.part             downloads in progress (same filesystem: rename is atomic)

A commit is put-if-absent: fsync the staged file, re-check its hash, link it
into place (os.link fails if the name exists, so two writers never overwrite
each other), fsync the directory, then drop the staging name. Committing the
same content twice is a no-op, which is what makes every stage safe to re-run
after a crash at any instruction.
"""
from __future__ import annotations

import errno
import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from media_crawler.errors import CrawlError, ErrorClass

CHUNK = 1024 * 1024


@dataclass(frozen=True)
class CommitResult:
    sha256: str
    size: int
    path: Path
    created: bool  # False: the content was already stored (dedup)


class BlobStore:
    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.blobs = self.root / "sha256"
        self.staging = self.root / "staging"

    def ensure(self) -> "BlobStore":
        self.blobs.mkdir(parents=True, exist_ok=True)
        self.staging.mkdir(parents=True, exist_ok=True)
        return self

    def path_for(self, sha256: str) -> Path:
        sha256 = sha256.lower()
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            raise ValueError(f"not a sha256 hex digest: {sha256!r}")
        return self.blobs / sha256[:2] / sha256[2:4] / sha256

    def staging_path(self, name: str) -> Path:
        """Staging names come from ledger ids, never from URLs or titles."""
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"bad staging name {name!r}")
        return self.staging / f"{name}.part"

    def has(self, sha256: str) -> bool:
        return self.path_for(sha256).is_file()

    def commit(self, staged: Path, sha256: str, *, verify_hash: bool = True, synced: bool = False) -> CommitResult:
        """Move a verified staging file into the store under its hash.

        verify_hash=False: the caller computed `sha256` over the very bytes it
        wrote to `staged` (the downloader hashes while streaming), so a re-read
        would only re-hash the page cache. synced=True: the caller fsynced
        `staged` after its last write. The link's directory is fsynced either way.
        """
        target = self.path_for(sha256)
        try:
            if target.exists():
                # Dedup, or a re-run after a crash between the link and the
                # ledger update: the content is already stored whole; drop ours.
                staged.unlink(missing_ok=True)
                return CommitResult(sha256, target.stat().st_size, target, created=False)
            size = staged.stat().st_size
            if verify_hash and file_sha256(staged) != sha256:
                raise CrawlError(ErrorClass.HASH_MISMATCH, "staged bytes do not hash to the expected name")
            if not synced:
                _fsync_file(staged)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(staged, target)
            except FileExistsError:
                pass  # a concurrent writer committed the same content first
            _fsync_dir(target.parent)
            staged.unlink(missing_ok=True)
            return CommitResult(sha256, size, target, created=True)
        except OSError as exc:
            raise storage_error(exc, "commit") from exc

    def iter_blobs(self):
        if not self.blobs.is_dir():
            return
        for path in self.blobs.glob("*/*/*"):
            if path.is_file():
                yield path

    def iter_parts(self):
        if self.staging.is_dir():
            yield from self.staging.glob("*.part")

    def free_bytes(self) -> int:
        probe = self.root if self.root.exists() else self.root.parent
        return shutil.disk_usage(probe).free


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def storage_error(exc: OSError, doing: str) -> CrawlError:
    error_class = ErrorClass.DISK_FULL if exc.errno in (errno.ENOSPC, errno.EDQUOT) else ErrorClass.STORAGE_ERROR
    return CrawlError(error_class, f"{doing}: {exc.strerror or exc}")


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

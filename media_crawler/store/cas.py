"""The content-addressed blob store: a blob is either absent or whole.

Layout under the root:
    sha256/<aa>/<bb>/<sha256-hex>   committed blobs, named by the hash of their bytes
    staging/<name>.part             downloads in progress (same filesystem: rename is atomic)

A commit is put-if-absent: fsync the staged file, re-check its hash, link it
into place (os.link fails if the name exists, so two writers never overwrite
each other), fsync the directory (and, when the link had to make its fan-out
folders, their parents too), then drop the staging name. Committing the
same content twice is a no-op, which is what makes every stage safe to re-run
after a crash at any instruction.
"""
from __future__ import annotations

import ctypes
import errno
import functools
import hashlib
import os
import re
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from media_crawler.errors import CrawlError, ErrorClass

CHUNK = 1024 * 1024
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
# Free space is read at most this often: a statfs per file is a system call
# per item at thousands of items a second, and the guard keeps a margin anyway.
FREE_SPACE_TTL_S = 0.5


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
        self._free_space: tuple[float, int] = (float("-inf"), 0)  # (read at, bytes free)
        # Inside deferred_sync(): (folders whose entries changed, staged names to drop).
        self._deferred: tuple[set[Path], list[Path]] | None = None

    @contextmanager
    def deferred_sync(self):
        """Commits inside share one flush of their folders, at the end, instead of one
        fsync per folder per blob (with 65,536 fan-out folders nearly every blob has a
        folder of its own, so that was an fsync per blob: half of a small file's
        commit). Each blob's bytes are still fsynced before its link, so a name never
        points at unwritten data; the links are durable when the block ends, and the
        staged names are dropped only then. The caller records the commits after the
        block (a crash before leaves rows to commit again: put-if-absent says stored)."""
        if self._deferred is not None:
            yield self
            return
        self._deferred = (set(), [])
        try:
            yield self
        finally:
            folders, staged = self._deferred
            self._deferred = None
            _sync_folders(self.root, folders)
            for path in staged:
                path.unlink(missing_ok=True)

    def ensure(self) -> "BlobStore":
        if self.blobs.is_dir() and self.staging.is_dir():
            return self
        self.blobs.mkdir(parents=True, exist_ok=True)
        self.staging.mkdir(parents=True, exist_ok=True)
        _fsync_dir(self.root)  # the new folders' names, before any blob is committed under them
        return self

    def path_for(self, sha256: str) -> Path:
        sha256 = sha256.lower()
        if not _SHA256_HEX.fullmatch(sha256):
            raise ValueError(f"not a sha256 hex digest: {sha256!r}")
        return self.blobs / sha256[:2] / sha256[2:4] / sha256

    def staging_path(self, name: str) -> Path:
        """Staging names come from ledger ids, never from URLs or titles."""
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"bad staging name {name!r}")
        return self.staging / f"{name}.part"

    def has(self, sha256: str) -> bool:
        return self.path_for(sha256).is_file()

    def commit(self, staged: Path, sha256: str, *, verify_hash: bool = True, synced: bool = False,
               size: int | None = None) -> CommitResult:
        """Move a verified staging file into the store under its hash.

        verify_hash=False: the caller computed `sha256` over the very bytes it
        wrote to `staged` (the downloader hashes while streaming), so a re-read
        would only re-hash the page cache. synced=True: the caller fsynced
        `staged` after its last write. size: the staged file's length, when
        the caller knows it. The link's directory is fsynced either way.
        """
        target = self.path_for(sha256)
        try:
            if verify_hash:
                if target.exists():
                    return self._already_stored(staged, target)
                if file_sha256(staged) != sha256:
                    raise CrawlError(ErrorClass.HASH_MISMATCH, "staged bytes do not hash to the expected name")
            if size is None:
                size = staged.stat().st_size
            if not synced:
                _fsync_file(staged)
            # The link is the existence test: it fails if the name is taken (the
            # content is stored already: dedup, a concurrent writer, or a re-run
            # after a crash between the link and the ledger update), and its
            # folder is made only when the link says it is missing. At thousands
            # of small files the stat and mkdir calls per file cost more than
            # the link itself.
            try:
                changed_folders = self._link_making_folders(staged, target)
            except FileExistsError:
                return self._already_stored(staged, target)
            if self._deferred is not None:
                self._deferred[0].update(changed_folders)
                self._deferred[1].append(staged)
            else:
                for folder in changed_folders:
                    _fsync_dir(folder)
                staged.unlink(missing_ok=True)
            return CommitResult(sha256, size, target, created=True)
        except OSError as exc:
            raise storage_error(exc, "commit") from exc

    def _link_making_folders(self, staged: Path, target: Path) -> list[Path]:
        """Link `staged` to `target`; return the folders whose entries changed, nearest first.

        The fan-out folders are made only when the link says one is missing.
        A new folder's name must then reach the disk too, not just the link:
        an fsync of a folder makes its entries durable, not the entry that
        names it in its parent (POSIX leaves that to the filesystem).
        """
        try:
            os.link(staged, target)
            return [target.parent]
        except FileNotFoundError:
            if not staged.exists():
                raise
        made_in = _make_folders(target.parent)
        os.link(staged, target)
        return [target.parent, *reversed(made_in)]

    @staticmethod
    def _already_stored(staged: Path, target: Path) -> CommitResult:
        """The content is already stored whole: drop our copy."""
        staged.unlink(missing_ok=True)
        return CommitResult(target.name, target.stat().st_size, target, created=False)

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
        """Free bytes on the store's filesystem (read at most every FREE_SPACE_TTL_S)."""
        now = time.monotonic()
        read_at, free = self._free_space
        if now - read_at >= FREE_SPACE_TTL_S:
            probe = self.root if self.root.exists() else self.root.parent
            free = shutil.disk_usage(probe).free
            self._free_space = (now, free)
        return free


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def storage_error(exc: OSError, doing: str) -> CrawlError:
    error_class = ErrorClass.DISK_FULL if exc.errno in (errno.ENOSPC, errno.EDQUOT) else ErrorClass.STORAGE_ERROR
    return CrawlError(error_class, f"{doing}: {exc.strerror or exc}")


def _make_folders(folder: Path) -> list[Path]:
    """Make `folder` and its missing parents; return the parent of each, outermost first.

    A folder another writer made a moment ago (FileExistsError) counts as
    made: its parent may not be synced yet, and the caller's ledger row must
    not say committed before it is.
    """
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
    return [path.parent for path in reversed(missing)]


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_folders(root: Path, folders: set[Path]) -> None:
    """Make the entries of `folders` durable: one syncfs(2) of the store's filesystem
    where Linux offers it (one call for a whole batch), else an fsync per folder."""
    if not folders:
        return
    if _syncfs(root):
        return
    for folder in sorted(folders, key=lambda path: len(path.parts), reverse=True):  # nearest first
        _fsync_dir(folder)


def _syncfs(root: Path) -> bool:
    syncfs = getattr(_libc(), "syncfs", None)
    if syncfs is None:
        return False
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return syncfs(fd) == 0
    finally:
        os.close(fd)


@functools.lru_cache(maxsize=1)
def _libc():
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

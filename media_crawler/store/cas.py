"""The BlobStore (store/blob_store.py) on a local or shared filesystem: a blob is either absent or whole.

Layout under the root (homes written by earlier versions have the same one):
    sha256/<aa>/<bb>/<sha256-hex>   committed blobs, named by the hash of their bytes
    staging/<name>.part             downloads in progress (same filesystem: link and rename are atomic)
    quarantine/<sha256-hex>.<time>  blobs that failed a check, kept aside for a person to look at

A commit is put-if-absent: fsync the staged file, re-check its hash, link it
into place (os.link fails if the name exists, so two writers never overwrite
each other), fsync the directory (and, when the link had to make its fan-out
folders, their parents too), then drop the staging name. Committing the
same content twice is a no-op, which is what makes every stage safe to re-run
after a crash at any instruction.
"""
from __future__ import annotations

import errno
import functools
import hashlib
import os
import re
import stat
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.store.blob_store import CHUNK, BlobStore, StoredBlob, file_sha256, probe_local_folder
from media_crawler.store.free_space import FreeSpace

__all__ = ["CHUNK", "FilesystemBlobStore", "StoredBlob", "file_sha256", "storage_error"]

BLOBS, STAGING, QUARANTINE = "sha256", "staging", "quarantine"
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
# The errors Path.is_file takes for "not there" (pathlib's _ignore_error); others are raised.
_ABSENT_ERRNOS = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)


class FilesystemBlobStore(BlobStore):
    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.blobs = self.root / BLOBS
        self.staging = self.root / STAGING
        self._blobs_text = f"{self.blobs}{os.sep}"
        self._free_space = FreeSpace(self.root)
        # Inside deferred_sync(): (folders whose entries changed, staged names to drop), both
        # as text: a str hashes and goes to the system call as it is, where a Path builds its
        # text first. Download threads commit concurrently (fetch-urls), so the pair is
        # swapped under a lock.
        self._deferred: tuple[set[str], list[str]] | None = None
        self._deferred_lock = threading.Lock()

    @contextmanager
    def deferred_sync(self):
        """Commits inside share one flush of their folders, at the end, instead of one
        fsync per folder per blob (with 65,536 fan-out folders nearly every blob has a
        folder of its own, so that was an fsync per blob: half of a small file's
        commit). Each blob's bytes are still fsynced before its link, so a name never
        points at unwritten data; the links are durable when the block ends (or at a
        sync_deferred() inside it), and the staged names are dropped only then. The
        caller records the commits after the flush (a crash before leaves rows to
        commit again: put-if-absent says stored)."""
        if self._deferred is not None:
            yield self
            return
        self._deferred = (set(), [])
        try:
            yield self
        finally:
            try:
                self.sync_deferred()
            finally:
                self._deferred = None

    def sync_deferred(self) -> None:
        """Make every link made so far inside deferred_sync() durable now and drop its
        staged name; the block goes on. fetch-urls calls it before each ledger batch,
        so no row says committed before its blob's name is on the disk. Outside the
        block: nothing to do."""
        with self._deferred_lock:
            if self._deferred is None:
                return
            folders, staged = self._deferred
            self._deferred = (set(), [])
        _sync_folders(self.root, folders)
        for name in staged:
            _unlink_if_there(name)

    def ensure(self) -> "FilesystemBlobStore":
        if self.blobs.is_dir() and self.staging.is_dir():
            return self
        self.blobs.mkdir(parents=True, exist_ok=True)
        self.staging.mkdir(parents=True, exist_ok=True)
        _fsync_dir(self.root)  # the new folders' names, before any blob is committed under them
        return self

    def path_for(self, sha256: str) -> Path:
        """Where blob `sha256` lives (the layout above); for this module and its tests only."""
        sha256 = sha256.lower()
        if not _SHA256_HEX.fullmatch(sha256):
            raise ValueError(f"not a sha256 hex digest: {sha256!r}")
        # Plain components (a checked hex digest): joined without pathlib's parse, a third
        # of one joinpath (asked at every commit).
        return _child(_child(_child(self.blobs, sha256[:2]), sha256[2:4]), sha256)

    def staging_path(self, name: str) -> Path:
        """Staging names come from ledger ids, never from URLs or titles."""
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"bad staging name {name!r}")
        return _child(self.staging, f"{name}.part")

    def _blob_text(self, sha256: str) -> str:
        """path_for(sha256) as text, without pathlib: what the hot calls (exists, and
        put_if_absent at every commit) hand to the system calls, with no Path to build
        and turn back into text at each of them."""
        sha256 = sha256.lower()
        if not _SHA256_HEX.fullmatch(sha256):
            raise ValueError(f"not a sha256 hex digest: {sha256!r}")
        return f"{self._blobs_text}{sha256[:2]}{os.sep}{sha256[2:4]}{os.sep}{sha256}"

    def exists(self, sha256: str) -> bool:
        # Asked before every download whose feed names a hash (dedup), judged as Path.is_file.
        target = self._blob_text(sha256)
        try:
            mode = os.stat(target).st_mode
        except OSError as exc:
            if exc.errno in _ABSENT_ERRNOS:
                return False
            raise
        except ValueError:  # as Path.is_file: a name the OS cannot hold is not a file
            return False
        return stat.S_ISREG(mode)

    def size(self, sha256: str) -> int:
        return self.path_for(sha256).stat().st_size

    def open(self, sha256: str) -> BinaryIO:
        return open(self.path_for(sha256), "rb")

    @contextmanager
    def local_file(self, sha256: str) -> Iterator[Path]:
        """The blob itself: it is never rewritten in place, so lending its name is safe."""
        path = self.path_for(sha256)
        if not path.is_file():
            raise FileNotFoundError(errno.ENOENT, "blob not in the store", sha256)
        yield path

    def location(self, sha256: str) -> str:
        return str(self.path_for(sha256))

    def iter_sha256s(self) -> Iterator[str]:
        if not self.blobs.is_dir():
            return
        for path in self.blobs.glob("*/*/*"):
            # Not ours when not named by a hash (an editor's backup file, ...): neither list nor touch it.
            if _SHA256_HEX.fullmatch(path.name) and path.is_file():
                yield path.name

    def quarantine(self, sha256: str) -> str:
        target = self.root / QUARANTINE / f"{sha256}.{int(time.time())}"
        target.parent.mkdir(parents=True, exist_ok=True)
        self.path_for(sha256).rename(target)  # same filesystem: atomic, and the bytes are kept
        return str(target)

    def release(self, sha256: str) -> None:
        """ReleasableBlobs (the answer store only). Not fsynced: a deletion a power cut
        undoes leaves a blob no row names, which the next sweep deletes again."""
        try:
            self.path_for(sha256).unlink(missing_ok=True)
        except OSError as exc:
            raise storage_error(exc, "release") from exc

    def put_stream_if_absent(self, stream: BinaryIO, sha256: str | None = None) -> StoredBlob:
        staged = self.staging_path(f"stream-{os.getpid()}-{time.monotonic_ns()}")
        stored = None
        try:
            digest = hashlib.sha256()
            with open(staged, "wb") as out:
                while chunk := stream.read(CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            if sha256 is not None and digest.hexdigest() != sha256.lower():
                raise CrawlError(ErrorClass.HASH_MISMATCH, "streamed bytes do not hash to the expected name")
            stored = self.put_if_absent(staged, digest.hexdigest(), verify_hash=False, synced=True)
            return stored
        except OSError as exc:
            raise storage_error(exc, "put") from exc
        finally:
            # A blob linked inside deferred_sync() keeps its staged name until the block's flush.
            if not (stored is not None and stored.created and self._deferred is not None):
                staged.unlink(missing_ok=True)

    def stored_name_of(self, staged: Path, hints: Iterable[str | None] = (), *,
                       may_hash: bool = True) -> str | None:
        """A staged file with one link is no blob's other name, and is never read."""
        try:
            st = staged.lstat()
        except FileNotFoundError:
            return None
        if st.st_nlink < 2 or not staged.is_file():
            return None
        candidates = [hint.lower() for hint in hints if hint and _SHA256_HEX.fullmatch(hint.lower())]
        for sha256 in dict.fromkeys(candidates):
            if _same_file(self.path_for(sha256), st):
                return sha256
        if not may_hash:
            return None
        try:
            digest = file_sha256(staged)
        except FileNotFoundError:
            return None
        return digest if _same_file(self.path_for(digest), st) else None

    def put_if_absent(self, staged: Path, sha256: str, *, verify_hash: bool = True, synced: bool = False,
                      size: int | None = None) -> StoredBlob:
        """Move a verified staging file into the store under its hash (the module docstring).

        verify_hash=False: the caller computed `sha256` over the very bytes it
        wrote to `staged` (the downloader hashes while streaming), so a re-read
        would only re-hash the page cache. synced=True: the caller fsynced
        `staged` after its last write. size: the staged file's length, when
        the caller knows it. The link's directory is fsynced either way.
        """
        # Both names as text from here on: each system call below would otherwise turn a
        # Path into text again (os.fspath), two per link, at every commit.
        target = self._blob_text(sha256)
        staged_text = os.fspath(staged)
        try:
            if verify_hash:
                if os.path.exists(target):
                    return self._already_stored(staged_text, target)
                if file_sha256(staged_text) != sha256:
                    raise CrawlError(ErrorClass.HASH_MISMATCH, "staged bytes do not hash to the expected name")
            if size is None:
                size = os.stat(staged_text).st_size
            if not synced:
                _fsync_file(staged_text)
            # The link is the existence test: it fails if the name is taken (the
            # content is stored already: dedup, a concurrent writer, or a re-run
            # after a crash between the link and the ledger update), and its
            # folder is made only when the link says it is missing. At thousands
            # of small files the stat and mkdir calls per file cost more than
            # the link itself.
            try:
                changed_folders = _link_making_folders(staged_text, target)
            except FileExistsError:
                return self._already_stored(staged_text, target)
            with self._deferred_lock:
                deferred = self._deferred
                if deferred is not None:
                    deferred[0].update(changed_folders)
                    deferred[1].append(staged_text)
            if deferred is None:
                for folder in changed_folders:
                    _fsync_dir(folder)
                _unlink_if_there(staged_text)
            return StoredBlob(sha256, size, created=True)
        except OSError as exc:
            raise storage_error(exc, "commit") from exc

    def _already_stored(self, staged: str, target: str) -> StoredBlob:
        """The content is already stored whole: drop our copy.

        Its name may not be durable yet: another thread or process may have linked it
        a moment ago and not yet synced its folders (or registered them for the
        deferred flush). The caller's row will say committed, so the blob's folders
        are made durable here too: registered for the deferred flush when inside
        deferred_sync() (a set insert), else synced now (found in review: a dedup
        racing a concurrent commit could record a blob a power cut then removed).
        """
        leaf = _folder_of(target)
        chain = [leaf, _folder_of(leaf), str(self.blobs)]  # sha256/<aa>/<bb>, sha256/<aa>, sha256
        with self._deferred_lock:
            deferred = self._deferred
            if deferred is not None:
                deferred[0].update(chain)
        if deferred is None:
            _sync_folders(self.root, set(chain))
        _unlink_if_there(staged)
        return StoredBlob(target.rpartition(os.sep)[2], os.stat(target).st_size, created=False)

    def iter_parts(self) -> Iterator[Path]:
        if self.staging.is_dir():
            yield from self.staging.glob("*.part")

    def probe_writable(self) -> str:
        """In the staging folder: the filesystem blobs land on (a put links from there)."""
        probe_local_folder(self.staging, f"{os.getpid()}-{time.monotonic_ns()}")
        return str(self.staging)

    def free_bytes(self) -> int:
        """Free bytes on the store's filesystem (read at most every FREE_SPACE_TTL_S)."""
        return self._free_space.bytes()


def _child(folder: Path, name: str) -> Path:
    """folder / name for a `name` known to be one plain component (staging names are
    checked first): without the parse `/` makes of it, which was most of staging_path's
    cost, asked three times per item (download, verify, commit). pathlib's own helper for
    its directory listings where the interpreter has it, else `/`."""
    make_child = getattr(folder, "_make_child_relpath", None)
    return make_child(name) if make_child is not None else folder / name


def storage_error(exc: OSError, doing: str) -> CrawlError:
    error_class = ErrorClass.DISK_FULL if exc.errno in (errno.ENOSPC, errno.EDQUOT) else ErrorClass.STORAGE_ERROR
    return CrawlError(error_class, f"{doing}: {exc.strerror or exc}")


def _link_making_folders(staged: str, target: str) -> list[str]:
    """Link `staged` to `target`; return the folders whose entries changed, nearest first.

    The fan-out folders are made only when the link says one is missing.
    A new folder's name must then reach the disk too, not just the link:
    an fsync of a folder makes its entries durable, not the entry that
    names it in its parent (POSIX leaves that to the filesystem).
    """
    folder = _folder_of(target)
    try:
        os.link(staged, target)
        return [folder]
    except FileNotFoundError:
        if not os.path.exists(staged):
            raise  # the staged file is gone: an error, not a reason to make folders
    made_in = _make_folders(folder)
    os.link(staged, target)
    return [folder, *reversed(made_in)]


def _make_folders(folder: str) -> list[str]:
    """Make `folder` and its missing parents; return the parent of each, outermost first.

    Called when a link said `folder` is missing, so its mkdir comes first, and a
    parent is looked at only when that mkdir says the parent is missing too (with
    tens of thousands of fan-out folders most small blobs make one: an exists()
    per level cost more than the mkdir). A folder another writer made a moment ago
    (FileExistsError) counts as made: its parent may not be synced yet, and the
    caller's ledger row must not say committed before it is.
    """
    # As Path.parent names it: a climb ends at "/" or "." (both exist).
    parent = folder.rpartition(os.sep)[0] or (os.sep if folder.startswith(os.sep) else os.curdir)
    try:
        os.mkdir(folder)
    except FileExistsError:
        pass
    except FileNotFoundError:
        made_in = _make_folders(parent)
        try:
            os.mkdir(folder)
        except FileExistsError:
            pass
        return [*made_in, parent]
    return [parent]


def _unlink_if_there(name: str) -> None:
    """Path.unlink(missing_ok=True) for a name already in text."""
    try:
        os.unlink(name)
    except FileNotFoundError:
        pass


def _same_file(path: Path, st: os.stat_result) -> bool:
    try:
        other = path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return False
    return (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino)


def _fsync_file(path: str | os.PathLike) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _folder_of(path: str) -> str:
    """The folder holding `path` (text), as Path.parent would name it."""
    return path.rpartition(os.sep)[0]


def _sync_folders(root: Path, folders: set[str]) -> None:
    """Make the entries of `folders` durable: one syncfs(2) of the store's filesystem
    where Linux offers it (one call for a whole batch), else an fsync per folder."""
    if not folders:
        return
    if _syncfs(root):
        return
    for folder in sorted(folders, key=lambda folder: folder.count(os.sep), reverse=True):  # nearest first
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
    import ctypes  # here, not at the top: 10 ms of a command's start-up, for syncfs only

    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _fsync_dir(path: str | os.PathLike) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

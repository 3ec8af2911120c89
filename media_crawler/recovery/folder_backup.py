"""A backup folder as a destination of the publish order (backup.py `publish_backup`).

    DIR/manifest.json          names the generation folder holding this backup's files
    DIR/files-<ns>/ledger.db | ledger.pgdump, dagster_home/... | dagster.pgdump, sources.yaml
    DIR/store/...              the blobs, shared by every generation (never removed)

Each backup writes its files into a new generation folder, the snapshots going there
directly; once the blobs are copied and every file of the generation is fsynced, the
manifest naming it replaces the old one in one rename (fsynced), and only then are the
older generation and the files of a pre-generation backup (format 2: beside the manifest)
removed. So the manifest a folder shows at any instant names files that are all there,
all of one backup, no newer than the manifest, and a ledger whose blobs are all there:
no mix of two backups' Dagster files. A killed run leaves its unfinished generation,
which no manifest names; the next run removes it first and converges.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from media_crawler.store.blob_store import BlobStore

GENERATION_PREFIX = "files-"


def is_generation_name(name: str) -> bool:
    """A name `files` in a manifest may hold: "" (beside the manifest) or files-<digits>,
    never a path that leaves the backup folder."""
    return name == "" or (name.startswith(GENERATION_PREFIX) and name[len(GENERATION_PREFIX):].isdigit())


class FolderDestination:
    def __init__(self, folder: Path, manifest_name: str, store_dir: str, legacy_files: tuple[str, ...]) -> None:
        self.folder, self.manifest_name, self.store_dir = folder, manifest_name, store_dir
        self.legacy_files = legacy_files  # a format-2 backup's files beside the manifest
        folder.mkdir(parents=True, exist_ok=True)
        live = self._live_generation()
        for path in folder.iterdir():  # a killed run's generation: no manifest names it
            if path.name.startswith(GENERATION_PREFIX) and path.name != live:
                shutil.rmtree(path, ignore_errors=True)
        (folder / (manifest_name + ".partial")).unlink(missing_ok=True)
        self.generation = f"{GENERATION_PREFIX}{time.time_ns()}"
        self.work = folder / self.generation
        self.work.mkdir()

    def _live_generation(self) -> str | None:
        try:
            return json.loads((self.folder / self.manifest_name).read_text()).get("files", "")
        except (OSError, ValueError, AttributeError):
            return None

    def blob_store(self) -> BlobStore:
        from media_crawler.store.open_store import open_blob_store

        return open_blob_store(self.folder / self.store_dir, create=True)

    def answer_store(self) -> BlobStore:
        from media_crawler.store.open_store import open_answer_store

        return open_answer_store(self.folder / self.store_dir, create=True)

    def publish(self, name: str) -> None:
        """The file is in place in its generation already: made durable before the manifest."""
        _fsync(self.work / name)

    def publish_manifest(self, manifest) -> None:
        for path in sorted(self.work.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            if path.is_dir():
                _fsync(path)
        _fsync(self.work)
        manifest.files = self.generation
        manifest.write(self.folder)  # one rename: the switch to this generation
        _fsync(self.folder)

    def close(self, published: bool) -> None:
        """Published: the older generation and a format-2 backup's files go. Not (an error
        on the way): this run's generation goes, the one the manifest names stays."""
        if not published:
            shutil.rmtree(self.work, ignore_errors=True)
            return
        for path in self.folder.iterdir():
            older = path.name.startswith(GENERATION_PREFIX) and path.name != self.generation
            if older or path.name in self.legacy_files or path.name.endswith(".partial"):
                shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if path.is_dir() else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

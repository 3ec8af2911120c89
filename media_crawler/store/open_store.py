"""Which `BlobStore` a crawl home has: the one place that chooses the implementation
(test_architecture.py), apart from the protocol (blob_store.py) and the implementations,
which build on the protocol's module: the filesystem (cas.py) and S3 (s3/)."""
from __future__ import annotations

import os

from media_crawler.store.blob_store import BlobStore
from media_crawler.store.cas import FilesystemBlobStore


def open_blob_store(location: str | os.PathLike, *, create: bool = False,
                    local_root: str | os.PathLike | None = None) -> BlobStore:
    """The store of a crawl home (`store:` in sources.yaml): a folder, or `s3://BUCKET/PREFIX`.
    create: make its folders when missing, and for a bucket check that it answers to our keys
    (a run that writes: a missing bucket or bad keys are one line before any download);
    without it a check or a report leaves the disk as it is. local_root: where an object
    store stages its uploads (the crawl home's local store folder)."""
    if is_object_store(location):
        from media_crawler.store.s3.blob_store import S3BlobStore  # only when a bucket is configured

        if local_root is None:
            raise ValueError("an s3:// store needs a local folder for its staged files")
        s3 = S3BlobStore.from_uri(str(location), local_root)
        return s3.ensure() if create else s3
    store = FilesystemBlobStore(location)
    return store.ensure() if create else store


def is_object_store(location: str | os.PathLike) -> bool:
    return isinstance(location, str) and location.startswith("s3://")


ANSWERS_FOLDER = "answers"


def open_answer_store(location: str | os.PathLike, *, create: bool = False,
                      local_root: str | os.PathLike | None = None) -> BlobStore:
    """The store of the API answers kept as fetched (pipeline/answers.py): a BlobStore of
    its own beside the media's (`<store>/answers`, a folder or a bucket prefix), so nothing
    that walks the media (integrity, reconcile, verification, the demo's totals) meets JSON
    pages, and answers can be released apart."""
    if is_object_store(location):
        answers = f"{str(location).rstrip('/')}/{ANSWERS_FOLDER}"
        staging = os.path.join(local_root, ANSWERS_FOLDER) if local_root is not None else None
        return open_blob_store(answers, create=create, local_root=staging)
    return open_blob_store(os.path.join(location, ANSWERS_FOLDER), create=create)

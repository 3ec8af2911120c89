"""Which `BlobStore` a crawl home has: the one place that chooses the implementation
(test_architecture.py), apart from the protocol (blob_store.py) and the filesystem
implementation (cas.py), which builds on the protocol's module."""
from __future__ import annotations

import os

from media_crawler.store.blob_store import BlobStore
from media_crawler.store.cas import FilesystemBlobStore


def open_blob_store(root: str | os.PathLike, *, create: bool = False) -> BlobStore:
    """The store of a crawl home (`store:` in sources.yaml). create: make its folders when
    missing (a run that writes); without it a check or a report leaves the disk as it is."""
    store = FilesystemBlobStore(root)
    return store.ensure() if create else store


ANSWERS_FOLDER = "answers"


def open_answer_store(root: str | os.PathLike, *, create: bool = False) -> BlobStore:
    """The store of the API answers kept as fetched (pipeline/answers.py): a BlobStore of
    its own beside the media's, so nothing that walks the media (integrity, reconcile,
    verification, the demo's totals) meets JSON pages, and answers can be released apart."""
    store = FilesystemBlobStore(os.path.join(root, ANSWERS_FOLDER))
    return store.ensure() if create else store

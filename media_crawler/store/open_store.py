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

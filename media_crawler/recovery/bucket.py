"""A backup in a bucket: the backup folder's layout (backup.py) as keys under s3://BUCKET/PREFIX.

    PREFIX/manifest.json               written last: a backup is complete once it is there
    PREFIX/ledger.db | ledger.pgdump   the ledger snapshot
    PREFIX/dagster_home/... | dagster.pgdump
    PREFIX/sources.yaml
    PREFIX/store/sha256/aa/bb/<hex>    the blobs (an S3 store's layout: store/s3/blob_store.py)
    PREFIX/store/answers/sha256/...    the kept API answers

The files are snapshotted into a local work folder first (the database snapshots need a
file), then the blobs are copied into the bucket, then the files are uploaded: the ledger,
then Dagster's storage, then the manifest. So at every moment of a backup, interrupted or
not, the ledger in the bucket names only blobs the bucket holds (the blobs of an earlier
backup stay; blobs are never removed), and Dagster's storage there is never newer than the
ledger there. Re-running an interrupted backup converges: blobs already there whole are
skipped, the files are overwritten. Every file carries its sha256 in its metadata, checked
on the way back (restore). The order is backup.py's `publish_backup`, shared with a folder
(`BucketDestination` below is how a bucket takes each step).

A bucket has no rename, so a run killed while uploading the files leaves the new ledger
beside Dagster files of which some are new and some the older backup's, under the older
manifest (a folder switches them all at once instead: folder_backup.py). The mix is harmless
by the rule the order keeps: every Dagster file there is a whole snapshot taken before the
ledger there (the new ones just before it, the old ones a backup earlier), so Dagster's
storage never shows a run as finished that the ledger does not know finished; restore trusts
the ledger (reconcile), not Dagster's run records, treats runs in flight as failed, and a
run's missing or older event log only shortens its history. The files the older manifest
names are all there, the blobs of both ledgers too; the next run overwrites the mix.

Endpoint and keys come from the AWS environment, as for an s3:// store (store/s3/settings.py):
a backup bucket on the crawl's own server, or on another one through the same variables.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from media_crawler.config import ConfigError
from media_crawler.store.blob_store import BlobStore


class BackupBucket:
    def __init__(self, uri: str) -> None:
        from media_crawler.store.s3.client import S3Client
        from media_crawler.store.s3.settings import connection_from_environment, parse_uri

        try:
            self.uri = parse_uri(uri)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        connection = connection_from_environment()
        self.client = S3Client(connection.endpoint, connection.region, connection.credentials)
        self.bucket, self.prefix = self.uri.bucket, self.uri.prefix

    def __str__(self) -> str:
        return str(self.uri)

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def check(self, doing: str) -> None:
        """The bucket answers to our keys: one line naming what is wrong (a missing bucket,
        bad keys, no endpoint) before anything is snapshotted or copied."""
        from media_crawler.store.s3.blob_store import s3_crawl_error
        from media_crawler.store.s3.client import S3Error, S3Unreachable

        try:
            self.client.head_bucket(self.bucket, self.key(""))
        except (S3Error, S3Unreachable) as exc:
            raise s3_crawl_error(exc, f"{doing} s3://{self.bucket}") from None

    def blob_store(self, folder: str, local_root: Path) -> BlobStore:
        """The backup's blobs (PREFIX/folder: backup.STORE_DIR) as an S3 store, staging its
        uploads under local_root."""
        from media_crawler.store.s3.blob_store import S3BlobStore
        from media_crawler.store.s3.settings import BucketUri

        return S3BlobStore(self.client, BucketUri(self.bucket, self.key(folder)), local_root)

    def answer_store(self, folder: str, local_root: Path) -> BlobStore:
        from media_crawler.store.open_store import ANSWERS_FOLDER
        from media_crawler.store.s3.blob_store import S3BlobStore
        from media_crawler.store.s3.settings import BucketUri

        return S3BlobStore(self.client, BucketUri(self.bucket, self.key(f"{folder}/{ANSWERS_FOLDER}")),
                           local_root / ANSWERS_FOLDER)

    def put(self, folder: Path, name: str) -> None:
        """Upload folder/name to PREFIX/name (replacing what an earlier backup left there)."""
        from media_crawler.store.s3.transfer import file_sha256, upload_file

        path = folder / name
        sha256, size = file_sha256(path)
        self._s3(lambda: upload_file(self.client, self.bucket, self.key(name), path, sha256, size,
                                     verify_hash=False, if_absent=False), f"upload {name} to")

    def get(self, name: str, folder: Path, *, missing_ok: bool = False) -> bool:
        """Download PREFIX/name to folder/name, checked against its recorded sha256; False
        when absent and missing_ok."""
        from media_crawler.store.s3.transfer import download_file

        try:
            self._s3(lambda: download_file(self.client, self.bucket, self.key(name), folder / name),
                     f"download {name} from")
        except _Absent:
            if missing_ok:
                return False
            raise ConfigError(f"s3://{self.bucket}/{self.key(name)}: no such object ({self.uri} is not a "
                              "media-crawler backup, or one whose first run has not finished)") from None
        return True

    def _s3(self, call, doing: str):
        from media_crawler.store.s3.blob_store import s3_crawl_error
        from media_crawler.store.s3.client import S3Error, S3Unreachable

        try:
            return call()
        except S3Error as exc:
            if exc.status == 404 and exc.code in ("NoSuchKey", "NotFound"):
                raise _Absent() from None
            raise s3_crawl_error(exc, f"{doing} s3://{self.bucket}") from None
        except S3Unreachable as exc:
            raise s3_crawl_error(exc, f"{doing} s3://{self.bucket}") from None


class BucketDestination:
    """backup.py `publish_backup` into a bucket: the files snapshotted into a local work
    folder, uploaded one by one (put, replacing), the manifest uploaded last."""

    def __init__(self, bucket: BackupBucket, local_root: Path, store_dir: str) -> None:
        self.bucket, self.store_dir = bucket, store_dir
        self.work = work_folder(local_root, str(bucket.uri))

    def blob_store(self) -> BlobStore:
        return self.bucket.blob_store(self.store_dir, self.work)

    def answer_store(self) -> BlobStore:
        return self.bucket.answer_store(self.store_dir, self.work)

    def publish(self, name: str) -> None:
        self.bucket.put(self.work, name)

    def publish_manifest(self, manifest) -> None:
        manifest.files = ""  # the files' keys are beside the manifest's
        self.bucket.put(self.work, manifest.write(self.work))

    def close(self, published: bool) -> None:
        shutil.rmtree(self.work, ignore_errors=True)


class _Absent(Exception):
    """The object asked for is not in the bucket."""


def work_folder(local_root: Path, uri: str) -> Path:
    """Where a backup to (or restore from) `uri` keeps its local files while it runs: one
    folder per bucket URI, emptied when a run starts (a killed run's files go then) and
    removed when it ends."""
    import hashlib

    folder = Path(local_root) / f".bucket-backup-{hashlib.sha256(uri.encode()).hexdigest()[:12]}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder

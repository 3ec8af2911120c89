"""One local file to one key and back, checked both ways against the file's sha256.

The store's commit (blob_store.py: put-if-absent, the key named by the hash) and a backup's
files in a bucket (recovery/bucket.py: the ledger snapshot, Dagster's storage, the
manifest, overwritten by the next backup) upload the same way:
- up to MULTIPART_THRESHOLD, one PutObject with the bytes' sha256 as
  `x-amz-checksum-sha256`, which the server checks (BadDigest: HASH_MISMATCH);
- above it, a multipart upload: parts of at least PART_SIZE, each with its own sha256
  checksum, the whole file's sha256 in the object's metadata (S3 keeps only a composite
  of the parts' checksums); any failure aborts it, so a half-sent file is never visible.
Either way the object's metadata carries the file's sha256 (SHA256_META), which a
download checks the bytes it wrote against.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import requests

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.store.s3.client import S3Client, S3Error, S3Unreachable

MULTIPART_THRESHOLD = 16 * 1024**2
PART_SIZE = 8 * 1024**2  # S3's floor is 5 MiB; at most MAX_PARTS parts, so huge files get larger ones
MAX_PARTS = 10_000
SHA256_META = "sha256"
CHUNK = 1024 * 1024


def upload_file(client: S3Client, bucket: str, key: str, path: Path, sha256: str, size: int, *,
                verify_hash: bool = True, if_absent: bool = True) -> bool:
    """Upload `path` (whose bytes must hash to `sha256`) to `key`; True when written, False
    when `if_absent` and the name was taken (412). verify_hash=False skips the local hash
    of a single PUT (the server checks the checksum it is sent). HASH_MISMATCH when the
    bytes are not `sha256`'s."""
    conditional = {"If-None-Match": "*"} if if_absent else {}
    metadata = {f"x-amz-meta-{SHA256_META}": sha256}
    if size <= MULTIPART_THRESHOLD:
        data = path.read_bytes()
        digest = hashlib.sha256(data).digest() if verify_hash else bytes.fromhex(sha256)
        if digest.hex() != sha256:
            raise CrawlError(ErrorClass.HASH_MISMATCH, "staged bytes do not hash to the expected name")
        try:
            client.put_object(bucket, key, data, digest, headers={**conditional, **metadata})
        except S3Error as exc:
            if exc.status == 412 and if_absent:
                return False
            raise
        return True
    part_size = max(PART_SIZE, -(-size // MAX_PARTS))
    upload_id = client.create_multipart(bucket, key, metadata)
    try:
        whole, parts = hashlib.sha256(), []
        with open(path, "rb") as stream:
            while data := stream.read(part_size):
                whole.update(data)
                digest = hashlib.sha256(data).digest()
                number = len(parts) + 1
                parts.append((number, client.upload_part(bucket, key, upload_id, number, data, digest), digest))
        if whole.hexdigest() != sha256:
            raise CrawlError(ErrorClass.HASH_MISMATCH, "staged bytes do not hash to the expected name")
        try:
            client.complete_multipart(bucket, key, upload_id, parts, headers=conditional)
        except S3Error as exc:
            if exc.status == 412 and if_absent:
                return False
            raise
        upload_id = None  # completed: nothing to abort
        return True
    finally:
        if upload_id is not None:
            abort_quietly(client, bucket, key, upload_id)


def abort_quietly(client: S3Client, bucket: str, key: str, upload_id: str) -> None:
    """Best effort: an upload this leaves is aborted by `reconcile --repair`."""
    try:
        client.abort_multipart(bucket, key, upload_id)
    except (S3Error, S3Unreachable):
        pass


def file_sha256(path: Path) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as stream:
        while chunk := stream.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def download_file(client: S3Client, bucket: str, key: str, target: Path) -> str:
    """GET `key` into `target` (written beside it, then renamed: never half a file under
    its name); the bytes' sha256, checked against the object's SHA256_META when it has one
    (HASH_MISMATCH). S3Error 404 when there is no such object."""
    partial = target.with_name(target.name + ".partial")
    target.parent.mkdir(parents=True, exist_ok=True)
    response = client.get_object(bucket, key)
    try:
        recorded = next((value for name, value in response.headers.items()
                         if name.lower() == f"x-amz-meta-{SHA256_META}"), None)
        digest = hashlib.sha256()
        with open(partial, "wb") as out:
            for chunk in response.iter_content(CHUNK):
                digest.update(chunk)
                out.write(chunk)
    except requests.RequestException as exc:  # a reset or a timeout mid-body
        partial.unlink(missing_ok=True)
        raise CrawlError(ErrorClass.CONNECTION_RESET,
                         f"read s3://{bucket}/{key}: the body was cut short ({type(exc).__name__})") from None
    finally:
        response.close()
    if recorded and recorded.lower() != digest.hexdigest():
        partial.unlink(missing_ok=True)
        raise CrawlError(ErrorClass.HASH_MISMATCH, f"s3://{bucket}/{key}: the bytes do not match their sha256")
    os.replace(partial, target)
    return digest.hexdigest()

"""The S3 store's commit against boto3's own `upload_file` of the same files, into SeaweedFS
(media_crawler_sim/seaweedfs.py) on 127.0.0.1, interleaved round by round in one process.

Both sides upload a staged file put-if-absent-free (boto3 has no conditional write in
upload_file) with a SHA-256 checksum the server checks: ours through `S3BlobStore.put_if_absent`
(verify_hash=False, as the commit stage calls it after hashing while downloading: one
PutObject with If-None-Match, or a multipart upload above 16 MiB with per-part checksums),
boto3 through `upload_file` with ChecksumAlgorithm=SHA256 and the same multipart threshold
and part size, one thread. Sets: `small` (many 32 KiB files) and `main` (24 MiB files,
multipart). Prints items/s, MB/s and process CPU per item for each side, and the load
average (wall time moves with the machine's other work; CPU per item much less).

boto3 is no dependency of the project: without it, only our side runs (`pip install boto3`).

    .venv/bin/python -m bench s3_commit [--rounds 3] [--small 400] [--main 12]
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path

from bench.instruments import load_1min
from media_crawler.store.s3.blob_store import MULTIPART_THRESHOLD, PART_SIZE, S3BlobStore
from media_crawler.store.s3.settings import parse_uri
from media_crawler_sim.seaweedfs import ACCESS_KEY, REGION, SECRET_KEY, start_seaweedfs

SMALL_BYTES, MAIN_BYTES = 32 * 1024, 24 * 1024 * 1024


def _files(folder: Path, count: int, size: int) -> list[tuple[Path, str]]:
    files = []
    for index in range(count):
        data = os.urandom(size)
        path = folder / str(index)
        path.write_bytes(data)
        files.append((path, hashlib.sha256(data).hexdigest()))
    return files


def _ours(server, files, work: Path) -> tuple[float, float]:
    store = S3BlobStore(server.client(), parse_uri(server.new_uri()), Path(tempfile.mkdtemp(dir=work))).ensure()
    staged = []
    for index, (path, sha256) in enumerate(files):  # the store consumes its staged files: copies, not timed
        copy = store.staging_path(f"task-{index}")
        shutil.copyfile(path, copy)
        staged.append((copy, sha256))
    cpu, wall = time.process_time(), time.monotonic()
    for copy, sha256 in staged:
        store.put_if_absent(copy, sha256, verify_hash=False)
    return time.monotonic() - wall, time.process_time() - cpu


def _boto3(client, server, files) -> tuple[float, float]:
    from boto3.s3.transfer import TransferConfig

    config = TransferConfig(multipart_threshold=MULTIPART_THRESHOLD + 1, multipart_chunksize=PART_SIZE,
                            use_threads=False)
    prefix = server.new_uri().split("/", 3)[3]
    cpu, wall = time.process_time(), time.monotonic()
    for path, sha256 in files:
        client.upload_file(str(path), server.bucket, f"{prefix}/sha256/{sha256[:2]}/{sha256[2:4]}/{sha256}",
                           Config=config, ExtraArgs={"ChecksumAlgorithm": "SHA256"})
    return time.monotonic() - wall, time.process_time() - cpu


def _row(name: str, side: str, count: int, size: int, wall: float, cpu: float) -> str:
    return (f"| {name} | {side} | {count} x {size // 1024} KiB | {count / wall:.1f} | {count * size / 1e6 / wall:.1f} "
            f"| {1000 * cpu / count:.2f} |")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench s3_commit", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small", type=int, default=400, help="files of 32 KiB")
    parser.add_argument("--main", type=int, default=12, help="files of 24 MiB")
    args = parser.parse_args(argv)
    try:
        import boto3
    except ImportError:
        boto3 = None
        print("boto3 is not installed: our side only (pip install boto3 for the peer)")
    server = start_seaweedfs()
    work = Path(tempfile.mkdtemp(prefix="s3-commit-bench-"))
    try:
        client = boto3.client("s3", endpoint_url=server.endpoint, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                              aws_secret_access_key=SECRET_KEY) if boto3 else None
        print(f"load average (1 min) at start: {load_1min():.1f}")
        print("| set | side | files | items/s | MB/s | CPU ms/item |\n|---|---|---|---|---|---|")
        for name, count, size in (("small", args.small, SMALL_BYTES), ("main", args.main, MAIN_BYTES)):
            files = _files(Path(tempfile.mkdtemp(dir=work)), count, size)
            for _round in range(args.rounds):
                print(_row(name, "S3BlobStore.put_if_absent", count, size, *_ours(server, files, work)), flush=True)
                if client is not None:
                    print(_row(name, "boto3 upload_file", count, size, *_boto3(client, server, files)), flush=True)
        print(f"load average (1 min) at end: {load_1min():.1f}")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0

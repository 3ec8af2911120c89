"""The S3 store against a real S3 server (SeaweedFS, media_crawler_tests/seaweedfs.py):
put-if-absent under concurrency, refused bodies, a multipart upload killed halfway,
and the one-line errors of a store that cannot be used."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.recovery.reconcile import reconcile
from media_crawler.store.ledger import Ledger
from media_crawler.store.s3 import blob_store as s3_blob_store
from media_crawler.store.s3.blob_store import S3BlobStore
from media_crawler.store.s3.client import S3Client
from media_crawler.store.s3.settings import parse_uri
from media_crawler.store.s3.sigv4 import Credentials
from media_crawler_tests.seaweedfs import ACCESS_KEY, REGION, SECRET_KEY

MULTIPART_BYTES = s3_blob_store.MULTIPART_THRESHOLD + 3 * 1024 * 1024  # three parts: 8 + 8 + 3 MiB


def open_store(server, local: Path, uri: str | None = None) -> S3BlobStore:
    return S3BlobStore(server.client(), parse_uri(uri or server.new_uri()), local).ensure()


def stage(store: S3BlobStore, name: str, data: bytes) -> Path:
    path = store.staging_path(name)
    path.write_bytes(data)
    return path


def blob_keys(server, store: S3BlobStore) -> list[str]:
    return [key for key in server.keys(str(store.uri)) if "/sha256/" in key]


def uploads(server, store: S3BlobStore) -> list:
    return list(server.client().list_multipart(store.bucket, store.prefix + "/"))


@pytest.mark.parametrize("size", [100_000, MULTIPART_BYTES], ids=["single_put", "multipart"])
def test_eight_concurrent_commits_of_one_blob_leave_one_object_and_eight_successes(s3_server, tmp_path, size):
    store = open_store(s3_server, tmp_path)
    data = os.urandom(size)
    digest = hashlib.sha256(data).hexdigest()
    staged = [stage(store, f"task-{n}", data) for n in range(8)]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda path: store.put_if_absent(path, digest), staged))
    assert [result.sha256 for result in results] == [digest] * 8 and {result.size for result in results} == {size}
    created = sum(result.created for result in results)
    if size <= s3_blob_store.MULTIPART_THRESHOLD:
        assert created == 1, "exactly one writer stored it"
    else:
        # SeaweedFS checks CompleteMultipartUpload's If-None-Match apart from the completion
        # itself: of 8 racing completions 1 to 3 succeeded here (AWS documents the check as
        # atomic). The bytes are the same, so the bucket still ends with one whole object.
        assert created >= 1
    assert blob_keys(s3_server, store) == [store.key_for(digest)]
    assert uploads(s3_server, store) == [], "the losers' multipart uploads were aborted"
    assert list(store.iter_parts()) == [], "every staged file removed once the object was confirmed"
    with store.open(digest) as stream:
        assert hashlib.sha256(stream.read()).hexdigest() == digest
    head = s3_server.client().head_object(store.bucket, store.key_for(digest))
    assert head.metadata["sha256"] == digest


@pytest.mark.parametrize("size", [100_000, MULTIPART_BYTES], ids=["single_put", "multipart"])
@pytest.mark.parametrize("verify_hash", [True, False], ids=["hashed_here", "caller_hashed"])
def test_a_body_whose_sha256_disagrees_is_refused_and_nothing_is_stored(s3_server, tmp_path, size, verify_hash):
    """verify_hash=False (a caller that says it hashed the bytes) is refused too: by the
    server's check of the checksum it is sent (BadDigest), or by the parts' hash."""
    store = open_store(s3_server, tmp_path)
    data = os.urandom(size)
    claimed = hashlib.sha256(data + b"!").hexdigest()
    with pytest.raises(CrawlError) as raised:
        store.put_if_absent(stage(store, "task-1", data), claimed, verify_hash=verify_hash)
    assert raised.value.error_class is ErrorClass.HASH_MISMATCH
    assert blob_keys(s3_server, store) == [] and uploads(s3_server, store) == []
    assert not store.exists(claimed)


def test_a_name_taken_by_other_bytes_is_no_success(s3_server, tmp_path):
    """412 means "stored" only once a HEAD finds the staged file's size and hash there."""
    store = open_store(s3_server, tmp_path)
    data = b"the real bytes"
    digest = hashlib.sha256(data).hexdigest()
    s3_server.client().request("PUT", store.bucket, store.key_for(digest), body=b"planted")
    with pytest.raises(CrawlError) as raised:
        store.put_if_absent(stage(store, "task-1", data), digest)
    assert raised.value.error_class is ErrorClass.STORAGE_ERROR and store.key_for(digest) in raised.value.message
    assert store.staging_path("task-1").exists(), "the staged file is kept until an upload is confirmed"


KILLED_UPLOAD = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from media_crawler.store.s3 import client
    from media_crawler.store.s3.blob_store import S3BlobStore
    from media_crawler.store.s3.settings import parse_uri
    from media_crawler.store.s3.sigv4 import Credentials

    endpoint, uri, local, key, secret, digest = sys.argv[1:7]
    upload_part = client.S3Client.upload_part
    def upload_then_die(self, *args):
        etag = upload_part(self, *args)
        if args[3] == 2:
            os.kill(os.getpid(), 9)  # SIGKILL after the second part: no finally, no abort
        return etag
    client.S3Client.upload_part = upload_then_die
    store = S3BlobStore(client.S3Client(endpoint, "us-east-1", Credentials(key, secret)), parse_uri(uri), Path(local))
    store.put_if_absent(store.staging_path("task-1"), digest)
""")


def test_a_multipart_upload_killed_halfway_leaves_no_object_and_reconcile_repair_aborts_it(s3_server, tmp_path):
    store = open_store(s3_server, tmp_path / "local")
    data = os.urandom(MULTIPART_BYTES)
    digest = hashlib.sha256(data).hexdigest()
    stage(store, "task-1", data)
    killed = subprocess.run([sys.executable, "-c", KILLED_UPLOAD, s3_server.endpoint, str(store.uri),
                             str(tmp_path / "local"), ACCESS_KEY, SECRET_KEY, digest],
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed.stderr
    assert blob_keys(s3_server, store) == [] and not store.exists(digest), "an unfinished upload is invisible"
    assert len(uploads(s3_server, store)) == 1 and store.staging_path("task-1").exists()

    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    checked = reconcile(ledger, store, part_grace_s=0)
    assert [finding.kind for finding in checked.problems if finding.kind == "stale_upload"] == ["stale_upload"]
    assert len(uploads(s3_server, store)) == 1, "a check without --repair changes nothing"
    repaired = reconcile(ledger, store, repair=True, part_grace_s=0)
    assert [f.action for f in repaired.findings if f.kind == "stale_upload"] == ["aborted"]
    assert uploads(s3_server, store) == []
    # The next commit of the same staged bytes starts again and stores them.
    stored = store.put_if_absent(stage(store, "task-1", data), digest)
    assert stored.created and blob_keys(s3_server, store) == [store.key_for(digest)]


def test_young_uploads_are_left_to_the_worker_writing_them(s3_server, tmp_path):
    store = open_store(s3_server, tmp_path)
    s3_server.client().create_multipart(store.bucket, store.key_for("a" * 64), {})
    report = reconcile(Ledger(f"sqlite:///{tmp_path / 'ledger.db'}"), store, repair=True, part_grace_s=300)
    assert [f for f in report.findings if f.kind == "stale_upload"] == [] and len(uploads(s3_server, store)) == 1


def test_a_missing_bucket_is_one_storage_error_naming_it(s3_server, tmp_path):
    with pytest.raises(CrawlError) as raised:
        open_store(s3_server, tmp_path, "s3://no-such-bucket-here/p")
    assert raised.value.error_class is ErrorClass.STORAGE_ERROR
    assert "s3://no-such-bucket-here" in raised.value.message and "NoSuchBucket" in raised.value.message


def test_bad_keys_are_one_auth_error_without_the_secret(s3_server, tmp_path):
    wrong = "wrong-secret-value-123"
    client = S3Client(s3_server.endpoint, REGION, Credentials(ACCESS_KEY, wrong))
    with pytest.raises(CrawlError) as raised:
        S3BlobStore(client, parse_uri(s3_server.new_uri()), tmp_path).ensure()
    assert raised.value.error_class is ErrorClass.AUTH and wrong not in str(raised.value)
    unknown = S3Client(s3_server.endpoint, REGION, Credentials("AKIDNOBODY", SECRET_KEY))
    with pytest.raises(CrawlError) as raised:
        S3BlobStore(unknown, parse_uri(s3_server.new_uri()), tmp_path).ensure()
    assert raised.value.error_class is ErrorClass.AUTH


def test_an_unreachable_endpoint_is_one_connection_error(tmp_path, monkeypatch):
    import socket

    from media_crawler.store.s3 import client as client_module

    monkeypatch.setattr(client_module, "BACKOFF_BASE_S", 0.01)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed once the block ends: nothing listens
    client = S3Client(f"http://127.0.0.1:{port}", REGION, Credentials(ACCESS_KEY, SECRET_KEY))
    with pytest.raises(CrawlError) as raised:
        S3BlobStore(client, parse_uri("s3://some-bucket/p"), tmp_path).ensure()
    assert raised.value.error_class is ErrorClass.CONNECTION_REFUSED
    assert "s3://some-bucket" in raised.value.message


def test_a_put_whose_staged_file_went_after_the_upload_finds_the_object(s3_server, tmp_path):
    """Killed after the upload and the staged file's removal, before the ledger heard: the
    next commit of the row finds its object (as a filesystem store finds its link)."""
    store = open_store(s3_server, tmp_path)
    data = b"uploaded, then the process died"
    digest = hashlib.sha256(data).hexdigest()
    assert store.put_if_absent(stage(store, "task-1", data), digest).created
    assert not store.staging_path("task-1").exists()
    again = store.put_if_absent(store.staging_path("task-1"), digest)
    assert again == s3_blob_store.StoredBlob(digest, len(data), created=False)
    with pytest.raises(CrawlError):
        store.put_if_absent(store.staging_path("task-2"), hashlib.sha256(b"never uploaded").hexdigest())


def test_quarantine_above_the_copy_limit_copies_part_by_part(s3_server, tmp_path, monkeypatch):
    """S3's CopyObject stops at 5 GiB: above the limit (lowered here) the object is copied by
    UploadPartCopy, whole, its metadata kept, and the name is freed."""
    import io

    monkeypatch.setattr(s3_blob_store, "COPY_LIMIT", 6 * 1024 * 1024)
    monkeypatch.setattr(s3_blob_store, "COPY_PART_SIZE", 5 * 1024 * 1024)
    store = open_store(s3_server, tmp_path)
    data = os.urandom(11 * 1024 * 1024)
    digest = store.put_stream_if_absent(io.BytesIO(data)).sha256
    copies = []
    request = S3Client.request

    def noting(self, method, bucket, key="", **kwargs):
        if "x-amz-copy-source" in (kwargs.get("headers") or {}):
            copies.append((kwargs["headers"].get("x-amz-copy-source-range"),
                           (kwargs.get("query") or {}).get("partNumber")))
        return request(self, method, bucket, key, **kwargs)

    monkeypatch.setattr(S3Client, "request", noting)
    where = store.quarantine(digest)
    assert copies == [("bytes=0-5242879", "1"), ("bytes=5242880-10485759", "2"), ("bytes=10485760-11534335", "3")]
    assert not store.exists(digest)
    key = where[len(f"s3://{store.bucket}/"):]
    assert hashlib.sha256(s3_server.client().get_object(store.bucket, key).content).hexdigest() == digest
    assert s3_server.client().head_object(store.bucket, key).metadata["sha256"] == digest
    assert uploads(s3_server, store) == []


def test_quarantine_at_or_below_the_copy_limit_is_one_copy(s3_server, tmp_path, monkeypatch):
    import io

    store = open_store(s3_server, tmp_path)
    digest = store.put_stream_if_absent(io.BytesIO(b"small and corrupt")).sha256
    where = store.quarantine(digest)
    key = where[len(f"s3://{store.bucket}/"):]
    assert s3_server.client().get_object(store.bucket, key).content == b"small and corrupt"
    assert not store.exists(digest)


KILLED_LENDING = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from media_crawler.store.s3 import client
    from media_crawler.store.s3.blob_store import S3BlobStore
    from media_crawler.store.s3.settings import parse_uri
    from media_crawler.store.s3.sigv4 import Credentials

    endpoint, uri, local, key, secret, digest = sys.argv[1:7]
    store = S3BlobStore(client.S3Client(endpoint, "us-east-1", Credentials(key, secret)), parse_uri(uri), Path(local))
    with store.local_file(digest) as lent:
        os.kill(os.getpid(), 9)  # killed while ffmpeg would read the copy: no finally runs
""")


def lent_copies(store: S3BlobStore) -> list[str]:
    return sorted(path.name for path in store.staging.glob(".lent-*"))


def test_a_lent_copy_is_removed_however_the_block_ends(s3_server, tmp_path):
    import io

    store = open_store(s3_server, tmp_path)
    digest = store.put_stream_if_absent(io.BytesIO(b"a track")).sha256
    with store.local_file(digest) as lent:
        assert lent.read_bytes() == b"a track" and lent_copies(store) == [lent.name]
    assert lent_copies(store) == []
    with pytest.raises(RuntimeError), store.local_file(digest):
        raise RuntimeError("ffmpeg failed")
    assert lent_copies(store) == []
    with pytest.raises(FileNotFoundError), store.local_file(hashlib.sha256(b"absent").hexdigest()):
        pass
    assert lent_copies(store) == [], "a download that fails leaves no copy either"


def test_a_killed_processs_lent_copy_is_swept_when_the_store_is_next_opened_and_a_live_ones_is_kept(
        s3_server, tmp_path):
    import io

    store = open_store(s3_server, tmp_path / "local")
    digest = store.put_stream_if_absent(io.BytesIO(b"a track")).sha256
    killed = subprocess.run([sys.executable, "-c", KILLED_LENDING, s3_server.endpoint, str(store.uri),
                             str(tmp_path / "local"), ACCESS_KEY, SECRET_KEY, digest],
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed.stderr
    [left] = lent_copies(store)
    assert (store.staging / left).read_bytes() == b"a track"
    other_machine = store.staging / f".lent-{os.getpid() + 1}-0123abcd-xyz"
    other_machine.write_bytes(b"")
    with store.local_file(digest) as live:
        open_store(s3_server, tmp_path / "local", str(store.uri))  # another run starts on this machine
        assert lent_copies(store) == sorted([live.name, other_machine.name]), \
            "the killed process's copy is gone; a live one and another machine's are kept"
    assert lent_copies(store) == [other_machine.name]

"""fetch-urls into an s3:// store, end to end against SeaweedFS: every object hashes to
its key, no blob lands on local disk, a second run makes no media request and writes no
object, and the secret reaches no output."""
from __future__ import annotations

import hashlib

import pytest

from media_crawler.cli import main as cli_main
from media_crawler.store.database import dispose_engines
from media_crawler.store.s3 import client as client_module
from media_crawler_tests.recovery.test_fetch_urls_killed_ten_times import FeedServer
from media_crawler_tests.seaweedfs import SECRET_KEY

FILES = 10


@pytest.fixture
def s3_env(s3_server, tmp_path, monkeypatch):
    for name, value in s3_server.environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MEDIA_CRAWLER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MEDIA_CRAWLER_LEDGER_URL", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    yield s3_server
    dispose_engines()


@pytest.fixture
def writes(monkeypatch):
    """The PUT and POST requests sent to S3 (object writes, multipart steps)."""
    sent: list[str] = []
    request = client_module.S3Client.request

    def counting(self, method, bucket, key="", **kwargs):
        if method in ("PUT", "POST"):
            sent.append(f"{method} {key}")
        return request(self, method, bucket, key, **kwargs)

    monkeypatch.setattr(client_module.S3Client, "request", counting)
    return sent


def fetch(server: FeedServer, uri: str, processes: int = 1) -> int:
    return cli_main(["fetch-urls", "--feed", f"{server.origin}/feed.json", "--store", uri,
                     "--allow-host", server.origin, "--workers", "4", "--processes", str(processes)])


def test_fetch_urls_into_a_bucket_and_again(s3_env, writes, tmp_path, capsys):
    uri = s3_env.new_uri()
    with FeedServer(files=FILES, latency_s=0.0) as server:
        assert fetch(server, uri) == 0
        all_keys = s3_env.keys(uri)
        # The feed's answer, kept for the archive (docs/EXPORT.md), under the answers/ prefix.
        answers = [key for key in all_keys if "/answers/sha256/" in key]
        keys = [key for key in all_keys if key not in answers]
        assert len(answers) == 1 and len(keys) == FILES and all("/sha256/" in key for key in keys)
        bucket = uri[len("s3://"):].split("/", 1)[0]
        for key in keys:
            response = s3_env.client().get_object(bucket, key)
            assert hashlib.sha256(response.content).hexdigest() == key.rsplit("/", 1)[1]
        assert sorted(hashlib.sha256(body).hexdigest() for body in server.files.values()) == \
            sorted(key.rsplit("/", 1)[1] for key in keys)
        local = [path for path in (tmp_path / "home").rglob("*") if path.is_file()]
        assert all(path.name.startswith("ledger.db") for path in local), f"only the ledger is local: {local}"
        assert len(writes) == FILES + 1  # the media and the feed's answer

        media_before, writes_before = server.media_answers, len(writes)
        assert fetch(server, uri) == 0
        assert server.media_answers == media_before, "a second run downloads nothing"
        assert len(writes) == writes_before, "and writes no object"
        assert s3_env.keys(uri) == all_keys  # the same answer again: kept once
    output = capsys.readouterr()
    assert SECRET_KEY not in output.out + output.err

    # reconcile --store finds the fetch-urls ledger of the bucket, and every object re-hashes.
    assert cli_main(["reconcile", "--store", uri, "--verify-hashes"]) == 0
    report = capsys.readouterr().out
    assert f"{FILES} blobs (re-hashed)" in report and "store and ledger agree" in report


def test_fetch_urls_in_forked_processes_shares_no_connection(s3_env):
    """--processes 2: each shard process signs and sends on connections of its own."""
    uri = s3_env.new_uri()
    with FeedServer(files=FILES, latency_s=0.0) as server:
        assert fetch(server, uri, processes=2) == 0
    assert len([key for key in s3_env.keys(uri) if "/answers/" not in key]) == FILES


def test_fetch_urls_with_bad_keys_stops_before_any_download(s3_env, monkeypatch, capsys):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret-at-all")
    with FeedServer(files=3, latency_s=0.0) as server:
        assert fetch(server, s3_env.new_uri()) != 0
        assert server.media_answers == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and '"error_class": "auth"' in err[0] and "not-the-secret-at-all" not in err[0]


def test_fetch_urls_into_a_missing_bucket_names_it(s3_env, capsys):
    with FeedServer(files=3, latency_s=0.0) as server:
        assert fetch(server, "s3://no-such-bucket-here/archive") != 0
        assert server.media_answers == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "s3://no-such-bucket-here" in err[0] and '"error_class": "storage_error"' in err[0]

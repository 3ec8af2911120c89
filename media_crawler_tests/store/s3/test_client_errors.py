"""How the S3 client and store read a server's refusals, against a scripted stand-in server
on 127.0.0.1 (answers SeaweedFS cannot be made to give): throttling and server failures are
retried and then classified like a rate limit and an outage; refusals name the bucket;
keys come only from the AWS environment or its profile files, and the secret is masked."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.scrub import scrub_text
from media_crawler.store.s3 import client as client_module
from media_crawler.store.s3.blob_store import S3BlobStore
from media_crawler.store.s3.client import S3Client
from media_crawler.store.s3.settings import connection_from_environment, parse_uri
from media_crawler.store.s3.sigv4 import Credentials

AWS_VARIABLES = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                 "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE",
                 "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE")


class Scripted:
    """Answers each request with the next (status, S3 error code) of a script, then 200."""

    def __init__(self, script: list[tuple[int, str]]) -> None:
        self.script, self.seen, self.puts = list(script), 0, []
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                scripted.seen += 1
                status, code = scripted.script.pop(0) if scripted.script else (200, "")
                body = (f"<Error><Code>{code}</Code><Message>scripted</Message></Error>" if code else
                        '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></ListBucketResult>').encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_PUT(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                scripted.puts.append(self.headers.get("If-None-Match"))
                self.do_GET()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def store(self, tmp_path) -> S3BlobStore:
        client = S3Client(self.endpoint, "us-east-1", Credentials("AKIDSCRIPTED", "scripted-secret"))
        return S3BlobStore(client, parse_uri("s3://scripted-bucket/p"), tmp_path)


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch):
    monkeypatch.setattr(client_module, "BACKOFF_BASE_S", 0.001)


@pytest.mark.parametrize("status, code, error_class", [
    (503, "SlowDown", ErrorClass.RATE_LIMITED), (429, "TooManyRequests", ErrorClass.RATE_LIMITED),
    (500, "InternalError", ErrorClass.HTTP_5XX),
])
def test_throttling_and_server_failures_are_retried_then_classified(tmp_path, status, code, error_class):
    server = Scripted([(status, code)] * 2)
    server.store(tmp_path).ensure()
    assert server.seen == 3, "retried until it answered"
    server = Scripted([(status, code)] * client_module.ATTEMPTS)
    with pytest.raises(CrawlError) as raised:
        server.store(tmp_path).ensure()
    assert raised.value.error_class is error_class and "s3://scripted-bucket" in raised.value.message
    assert server.seen == client_module.ATTEMPTS


@pytest.mark.parametrize("code, error_class", [
    ("AccessDenied", ErrorClass.STORAGE_ERROR), ("NoSuchBucket", ErrorClass.STORAGE_ERROR),
    ("InvalidAccessKeyId", ErrorClass.AUTH), ("SignatureDoesNotMatch", ErrorClass.AUTH),
])
def test_refusals_are_not_retried_and_name_the_bucket(tmp_path, code, error_class):
    server = Scripted([(403 if code != "NoSuchBucket" else 404, code)])
    with pytest.raises(CrawlError) as raised:
        server.store(tmp_path).ensure()
    assert raised.value.error_class is error_class and server.seen == 1
    assert "s3://scripted-bucket" in raised.value.message and code in raised.value.message


def test_a_conditional_write_conflict_is_tried_again(tmp_path):
    """409 ConditionalRequestConflict: another conditional write on the key was in flight; put again."""
    import hashlib

    server = Scripted([(409, "ConditionalRequestConflict")])
    store = server.store(tmp_path)
    store.staging.mkdir(parents=True)
    staged = store.staging_path("task-1")
    staged.write_bytes(b"conflicted")
    stored = store.put_if_absent(staged, hashlib.sha256(b"conflicted").hexdigest())
    assert stored.created and server.puts == ["*", "*"] and not staged.exists()


@pytest.fixture
def no_aws(monkeypatch, tmp_path):
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    return monkeypatch


def test_keys_from_the_environment_and_the_secret_is_masked(no_aws):
    no_aws.setenv("AWS_ACCESS_KEY_ID", "AKIDFROMENV")
    no_aws.setenv("AWS_SECRET_ACCESS_KEY", "env-secret-never-shown-42")
    no_aws.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000/")
    no_aws.setenv("AWS_DEFAULT_REGION", "eu-west-3")
    connection = connection_from_environment()
    assert (connection.endpoint, connection.region, connection.credentials.access_key) == \
        ("http://127.0.0.1:9000", "eu-west-3", "AKIDFROMENV")
    assert "env-secret-never-shown-42" not in scrub_text("signing with env-secret-never-shown-42 failed")
    assert "env-secret-never-shown-42" not in repr(connection)


def test_keys_from_a_named_profile_when_the_environment_has_none(no_aws, tmp_path):
    (tmp_path / "credentials").write_text("[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = d\n"
                                          "[archive]\naws_access_key_id = AKIDPROFILE\n"
                                          "aws_secret_access_key = profile-secret-never-shown\n")
    (tmp_path / "config").write_text("[profile archive]\nregion = ap-south-1\nendpoint_url = https://s3.example.test\n")
    no_aws.setenv("AWS_PROFILE", "archive")
    connection = connection_from_environment()
    assert (connection.endpoint, connection.region, connection.credentials.access_key) == \
        ("https://s3.example.test", "ap-south-1", "AKIDPROFILE")
    assert "profile-secret-never-shown" not in scrub_text("x profile-secret-never-shown y")


def test_no_keys_anywhere_is_one_auth_error(no_aws):
    with pytest.raises(CrawlError) as raised:
        connection_from_environment()
    assert raised.value.error_class is ErrorClass.AUTH and "AWS_ACCESS_KEY_ID" in raised.value.message


@pytest.mark.parametrize("uri", ["s3://", "s3://UPPER/p", "s3://ab/p", "s3://bucket/a//b", "s3://bucket/../x"])
def test_a_malformed_bucket_uri_is_a_config_error(tmp_path, uri):
    from media_crawler.config import ConfigError, config_from_dict

    with pytest.raises(ConfigError, match="store:"):
        config_from_dict({"store": uri, "sources": []})

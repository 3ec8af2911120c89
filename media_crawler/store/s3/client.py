"""The S3 operations the blob store needs, over requests with SigV4 (sigv4.py).

Why not boto3: the store needs about a dozen calls, each with headers it must control
exactly (If-None-Match on PutObject and CompleteMultipartUpload, x-amz-checksum-sha256,
the metadata), and importing boto3 costs about half a second of every command's start-up
for the filesystem users too. requests is a dependency already.

Requests are path style (ENDPOINT/BUCKET/KEY): every S3-compatible server answers it.
Throttling (503 SlowDown, 429) and server failures (5xx, a reset or refused connection,
a timeout) are retried here with capped, jittered backoff, Retry-After first; what is
left is raised as S3Error (a status and S3's error code) or S3Unreachable.
"""
from __future__ import annotations

import base64
import hashlib
import os
import random
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterator, Mapping
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter

from media_crawler.http import parse_retry_after
from media_crawler.store.s3.sigv4 import EMPTY_SHA256, Credentials, sign, uri_encode

THROTTLED = frozenset({429, 503})  # 503 SlowDown is S3's own throttle answer
RETRIED_STATUSES = frozenset({500, 502, 503, 504, 429})
ATTEMPTS = 6
BACKOFF_BASE_S, BACKOFF_CAP_S = 0.2, 10.0
TIMEOUT_S = (10.0, 120.0)  # (connect, read): a part of 8 MiB on a slow link still fits
_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


class S3Error(Exception):
    """The server refused a request: its status and S3 error code (NoSuchKey, AccessDenied, ...)."""

    def __init__(self, status: int, code: str, message: str = "") -> None:
        super().__init__(f"{status} {code}: {message}" if message else f"{status} {code}")
        self.status, self.code, self.message = status, code, message


class S3Unreachable(Exception):
    """No answer after the retries: the endpoint is down, unreachable, or timing out."""

    def __init__(self, endpoint: str, reason: str, *, refused: bool = False, timed_out: bool = False) -> None:
        super().__init__(f"{endpoint}: {reason}")
        self.refused, self.timed_out = refused, timed_out


@dataclass(frozen=True)
class Head:
    size: int
    metadata: dict[str, str]  # x-amz-meta-* without the prefix
    checksum_sha256: str | None  # base64, when the object was stored with one (single PUT)


def checksum_b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode()


class S3Client:
    def __init__(self, endpoint: str, region: str, credentials: Credentials, *, pool_size: int = 16) -> None:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"not an http(s) endpoint: {endpoint!r}")
        self.endpoint = f"{parts.scheme}://{parts.netloc}"
        self.host = parts.netloc
        self.region = region
        self._credentials = credentials
        self._local = threading.local()  # a requests.Session is not safe to share across threads
        self._pool_size = pool_size

    @property
    def session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None or self._local.pid != os.getpid():
            # A forked shard process (fetch-urls --processes) must not reuse its parent's
            # sockets: a new session, new connections.
            self._local.pid = os.getpid()
            session = requests.Session()
            session.trust_env = False  # no netrc or proxy guesses: the signed headers are all we send
            adapter = HTTPAdapter(pool_connections=1, pool_maxsize=self._pool_size, max_retries=0)
            session.mount("http://", adapter)
            session.mount("https://", adapter)
            self._local.session = session
        return session

    # -- the transport ---------------------------------------------------------------
    def request(self, method: str, bucket: str, key: str = "", *, query: Mapping[str, str] | None = None,
                headers: Mapping[str, str] | None = None, body: bytes = b"", payload_sha256: str | None = None,
                stream: bool = False) -> requests.Response:
        """One signed request, retried while the answer says "later"; a 2xx or 3xx answer
        (304, and 412 is raised as S3Error like any other refusal)."""
        path = "/" + uri_encode(bucket, keep_slash=False) + ("/" + uri_encode(key, keep_slash=True) if key else "")
        query = dict(query or {})
        payload = payload_sha256 or (hashlib.sha256(body).hexdigest() if body else EMPTY_SHA256)
        url = self.endpoint + path + ("?" + "&".join(
            f"{uri_encode(name, keep_slash=False)}={uri_encode(value, keep_slash=False)}" if value != "" else
            uri_encode(name, keep_slash=False) for name, value in query.items()) if query else "")
        for attempt in range(1, ATTEMPTS + 1):
            signed = sign(method, path, query, {"Host": self.host, **(headers or {})}, payload,
                          credentials=self._credentials, region=self.region, now=datetime.now(timezone.utc))
            signed.pop("Host")  # requests writes Host itself, the same value
            if body:
                signed["Content-Length"] = str(len(body))
            try:
                response = self.session.request(method, url, data=body or None, headers=signed, stream=stream,
                                                timeout=TIMEOUT_S, allow_redirects=False)
            except requests.ConnectionError as exc:
                if attempt == ATTEMPTS:
                    refused = "refused" in str(exc).lower()
                    raise S3Unreachable(self.endpoint, "connection refused" if refused else "connection failed",
                                        refused=refused) from None
                time.sleep(_backoff(attempt, None))
                continue
            except requests.Timeout:
                if attempt == ATTEMPTS:
                    raise S3Unreachable(self.endpoint, "timed out", timed_out=True) from None
                time.sleep(_backoff(attempt, None))
                continue
            if response.status_code < 400:
                return response
            error = _error_of(response)
            if response.status_code in RETRIED_STATUSES and attempt < ATTEMPTS:
                time.sleep(_backoff(attempt, parse_retry_after(response.headers.get("Retry-After"))))
                continue
            raise error
        raise AssertionError("unreachable")  # the loop returns or raises

    # -- objects ----------------------------------------------------------------------
    def put_object(self, bucket: str, key: str, body: bytes, sha256_digest: bytes, *,
                   headers: Mapping[str, str] | None = None) -> None:
        """PutObject with the body's sha256 signed and as a checksum the server checks (BadDigest)."""
        self.request("PUT", bucket, key, body=body, payload_sha256=sha256_digest.hex(),
                     headers={"x-amz-checksum-sha256": checksum_b64(sha256_digest), **(headers or {})})

    def head_object(self, bucket: str, key: str) -> Head | None:
        """The object's size and metadata; None when there is no such object."""
        try:
            response = self.request("HEAD", bucket, key, headers={"x-amz-checksum-mode": "ENABLED"})
        except S3Error as exc:
            if exc.status == 404:
                return None
            raise
        metadata = {name[len("x-amz-meta-"):].lower(): value for name, value in response.headers.items()
                    if name.lower().startswith("x-amz-meta-")}
        return Head(int(response.headers.get("Content-Length", "0")), metadata,
                    response.headers.get("x-amz-checksum-sha256"))

    def get_object(self, bucket: str, key: str) -> requests.Response:
        """A streaming GET (the caller closes it); S3Error 404 when absent."""
        return self.request("GET", bucket, key, stream=True)

    def delete_object(self, bucket: str, key: str) -> None:
        self.request("DELETE", bucket, key)

    def copy_object(self, bucket: str, source_key: str, target_key: str) -> None:
        """CopyObject: S3 copies at most COPY_LIMIT bytes this way (upload_part_copy above)."""
        self.request("PUT", bucket, target_key, headers={"x-amz-copy-source": _copy_source(bucket, source_key)})

    def upload_part_copy(self, bucket: str, key: str, upload_id: str, number: int, source_key: str,
                         first: int, last: int) -> str:
        """UploadPartCopy of bytes first..last (inclusive) of source_key; the part's ETag."""
        response = self.request("PUT", bucket, key, query={"partNumber": str(number), "uploadId": upload_id},
                                headers={"x-amz-copy-source": _copy_source(bucket, source_key),
                                         "x-amz-copy-source-range": f"bytes={first}-{last}"})
        root = ET.fromstring(response.content)
        return root.findtext(f"{_NS}ETag") or root.findtext("ETag") or ""

    def list_keys(self, bucket: str, prefix: str) -> Iterator[tuple[str, int]]:
        """(key, size) of every object under `prefix` (ListObjectsV2, page by page)."""
        token = None
        while True:
            query = {"list-type": "2", "prefix": prefix, **({"continuation-token": token} if token else {})}
            root = ET.fromstring(self.request("GET", bucket, query=query).content)
            for item in root.iter(f"{_NS}Contents"):
                yield item.findtext(f"{_NS}Key") or "", int(item.findtext(f"{_NS}Size") or 0)
            token = root.findtext(f"{_NS}NextContinuationToken")
            if root.findtext(f"{_NS}IsTruncated") != "true" or not token:
                return

    def head_bucket(self, bucket: str, prefix: str = "") -> None:
        """The bucket answers to our keys (a listing of at most one key under `prefix`, so a
        policy scoped to the prefix passes). Raises S3Error (404 NoSuchBucket, 403
        AccessDenied/InvalidAccessKeyId/...) or S3Unreachable."""
        self.request("GET", bucket, query={"list-type": "2", "max-keys": "1", "prefix": prefix})

    # -- multipart --------------------------------------------------------------------
    def create_multipart(self, bucket: str, key: str, headers: Mapping[str, str], *, checksums: bool = True) -> str:
        """checksums: each part is sent with its sha256 (a copy's parts are not sent: False)."""
        algorithm = {"x-amz-checksum-algorithm": "SHA256"} if checksums else {}
        root = ET.fromstring(self.request("POST", bucket, key, query={"uploads": ""},
                                          headers={**algorithm, **headers}).content)
        return root.findtext(f"{_NS}UploadId") or ""

    def upload_part(self, bucket: str, key: str, upload_id: str, number: int, body: bytes, digest: bytes) -> str:
        """The part's ETag; the part's sha256 is signed and sent as its checksum."""
        response = self.request("PUT", bucket, key, query={"partNumber": str(number), "uploadId": upload_id},
                                body=body, payload_sha256=digest.hex(),
                                headers={"x-amz-checksum-sha256": checksum_b64(digest)})
        return response.headers.get("ETag", "")

    def complete_multipart(self, bucket: str, key: str, upload_id: str, parts: list[tuple[int, str, bytes]], *,
                           headers: Mapping[str, str] | None = None) -> None:
        """parts: (number, ETag, sha256 digest or None for a copied part). S3 may answer 200
        with an <Error> body."""
        body = ("<CompleteMultipartUpload>" + "".join(
            f"<Part><PartNumber>{number}</PartNumber><ETag>{etag}</ETag>"
            + (f"<ChecksumSHA256>{checksum_b64(digest)}</ChecksumSHA256>" if digest is not None else "")
            + "</Part>" for number, etag, digest in parts)
            + "</CompleteMultipartUpload>").encode()
        response = self.request("POST", bucket, key, query={"uploadId": upload_id}, body=body, headers=headers)
        root = ET.fromstring(response.content) if response.content.strip() else None
        if root is not None and root.tag in ("Error", f"{_NS}Error"):
            raise S3Error(500, root.findtext("Code") or root.findtext(f"{_NS}Code") or "InternalError",
                          root.findtext("Message") or root.findtext(f"{_NS}Message") or "")

    def abort_multipart(self, bucket: str, key: str, upload_id: str) -> None:
        try:
            self.request("DELETE", bucket, key, query={"uploadId": upload_id})
        except S3Error as exc:
            if exc.status != 404:  # NoSuchUpload: aborted or completed already
                raise

    def list_multipart(self, bucket: str, prefix: str) -> Iterator[tuple[str, str, str]]:
        """(key, upload id, initiated, ISO 8601) of every unfinished multipart upload under `prefix`."""
        markers: dict[str, str] = {}
        while True:
            query = {"uploads": "", "prefix": prefix, **markers}
            root = ET.fromstring(self.request("GET", bucket, query=query).content)
            for upload in root.iter(f"{_NS}Upload"):
                yield (upload.findtext(f"{_NS}Key") or "", upload.findtext(f"{_NS}UploadId") or "",
                       upload.findtext(f"{_NS}Initiated") or "")
            if root.findtext(f"{_NS}IsTruncated") != "true":
                return
            markers = {"key-marker": root.findtext(f"{_NS}NextKeyMarker") or "",
                       "upload-id-marker": root.findtext(f"{_NS}NextUploadIdMarker") or ""}


def _copy_source(bucket: str, key: str) -> str:
    return "/" + uri_encode(bucket, keep_slash=False) + "/" + uri_encode(key, keep_slash=True)


def _error_of(response: requests.Response) -> S3Error:
    code, message = "", ""
    if response.content and response.request.method != "HEAD":
        try:
            root = ET.fromstring(response.content)
            code = root.findtext("Code") or root.findtext(f"{_NS}Code") or ""
            message = root.findtext("Message") or root.findtext(f"{_NS}Message") or ""
        except ET.ParseError:
            pass
    response.close()
    fallback = {404: "NotFound", 403: "Forbidden", 412: "PreconditionFailed", 409: "Conflict"}
    return S3Error(response.status_code, code or fallback.get(response.status_code, "HTTP"), message[:200])


def _backoff(attempt: int, retry_after: float | None) -> float:
    if retry_after is not None:
        return min(max(retry_after, 0.0), BACKOFF_CAP_S * 3)
    ceiling = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (attempt - 1))
    return random.uniform(ceiling / 2, ceiling)

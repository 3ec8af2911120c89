"""AWS Signature Version 4 for S3 requests (the Authorization header form).

Written against the S3 API reference, "Authenticating Requests: Using the Authorization
Header" (sig-v4-header-based-auth); its worked examples are the unit tests
(media_crawler_tests/store/s3/test_sigv4.py). S3 differs from the other services in two
ways that matter here: a path is encoded once (not twice), and every request carries
x-amz-content-sha256, the payload's hash (or UNSIGNED-PAYLOAD), which is signed.
"""
from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Mapping
from urllib.parse import quote

ALGORITHM = "AWS4-HMAC-SHA256"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
_UNRESERVED = "-_.~"  # with letters and digits: the only characters SigV4 leaves unencoded


@dataclass(frozen=True)
class Credentials:
    access_key: str
    secret_key: str
    session_token: str | None = None

    def __repr__(self) -> str:  # never the secret, whatever prints this
        return f"Credentials(access_key={self.access_key!r}, secret_key='***')"


def uri_encode(text: str, *, keep_slash: bool) -> str:
    return quote(text, safe=_UNRESERVED + ("/" if keep_slash else ""))


def canonical_query(params: Mapping[str, str]) -> str:
    encoded = sorted((uri_encode(name, keep_slash=False), uri_encode(value, keep_slash=False))
                     for name, value in params.items())
    return "&".join(f"{name}={value}" for name, value in encoded)


def amz_date(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def signing_key(secret_key: str, day: str, region: str, service: str = "s3") -> bytes:
    key = ("AWS4" + secret_key).encode()
    for part in (day, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def sign(method: str, path: str, query: Mapping[str, str], headers: Mapping[str, str], payload_sha256: str, *,
         credentials: Credentials, region: str, now: datetime) -> dict[str, str]:
    """The headers to send: `headers` (which must hold Host) plus x-amz-date,
    x-amz-content-sha256, the session token when there is one, and Authorization.
    `path` is the encoded path (uri_encode(..., keep_slash=True)), as it goes on the wire."""
    stamp = amz_date(now)
    signed = {name.lower(): " ".join(str(value).split()) for name, value in headers.items()}
    signed["x-amz-date"] = stamp
    signed["x-amz-content-sha256"] = payload_sha256
    if credentials.session_token:
        signed["x-amz-security-token"] = credentials.session_token
    names = sorted(signed)
    canonical_request = "\n".join([
        method,
        path,
        canonical_query(query),
        "".join(f"{name}:{signed[name]}\n" for name in names),
        ";".join(names),
        payload_sha256,
    ])
    scope = f"{stamp[:8]}/{region}/s3/aws4_request"
    string_to_sign = "\n".join([ALGORITHM, stamp, scope, hashlib.sha256(canonical_request.encode()).hexdigest()])
    signature = hmac.new(signing_key(credentials.secret_key, stamp[:8], region), string_to_sign.encode(),
                         hashlib.sha256).hexdigest()
    out = {**headers, "x-amz-date": stamp, "x-amz-content-sha256": payload_sha256}
    if credentials.session_token:
        out["x-amz-security-token"] = credentials.session_token
    out["Authorization"] = (f"{ALGORITHM} Credential={credentials.access_key}/{scope},"
                            f"SignedHeaders={';'.join(names)},Signature={signature}")
    return out

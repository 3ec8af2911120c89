"""The signer against the worked examples of AWS's S3 API reference ("Authenticating
Requests: Using the Authorization Header", sig-v4-header-based-auth): example
credentials, 24 May 2013, us-east-1, bucket `examplebucket` (virtual-hosted style)."""
from __future__ import annotations

import hashlib
from datetime import datetime, timezone

from media_crawler.store.s3.sigv4 import EMPTY_SHA256, Credentials, canonical_query, sign, uri_encode

EXAMPLE = Credentials("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
HOST = {"Host": "examplebucket.s3.amazonaws.com"}
MAY_24 = datetime(2013, 5, 24, tzinfo=timezone.utc)


def signature(method, path, query, headers, payload):
    authorization = sign(method, path, query, headers, payload, credentials=EXAMPLE, region="us-east-1",
                         now=MAY_24)["Authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,")
    return authorization.rsplit("Signature=", 1)[1]


def test_get_object_with_a_range():
    assert signature("GET", "/test.txt", {}, {**HOST, "Range": "bytes=0-9"}, EMPTY_SHA256) == \
        "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"


def test_put_object_with_a_body_and_an_encoded_key():
    body = b"Welcome to Amazon S3."
    headers = {**HOST, "Date": "Fri, 24 May 2013 00:00:00 GMT", "x-amz-storage-class": "REDUCED_REDUNDANCY"}
    path = "/" + uri_encode("test$file.text", keep_slash=True)
    assert path == "/test%24file.text"
    assert signature("PUT", path, {}, headers, hashlib.sha256(body).hexdigest()) == \
        "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"


def test_get_bucket_lifecycle_a_subresource_without_a_value():
    assert signature("GET", "/", {"lifecycle": ""}, HOST, EMPTY_SHA256) == \
        "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"


def test_list_objects_query_sorted():
    assert signature("GET", "/", {"prefix": "J", "max-keys": "2"}, HOST, EMPTY_SHA256) == \
        "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"


def test_encoding_keeps_only_unreserved_characters():
    assert uri_encode("a b+c/d~e", keep_slash=True) == "a%20b%2Bc/d~e"
    assert uri_encode("a/b", keep_slash=False) == "a%2Fb"
    assert canonical_query({"prefix": "p/sha256/", "list-type": "2"}) == "list-type=2&prefix=p%2Fsha256%2F"


def test_the_secret_never_prints():
    assert "EXAMPLEKEY" not in repr(EXAMPLE)

"""Where an S3 store is and how to sign for it: the bucket URI from the configuration
(`store: s3://BUCKET/PREFIX`), everything else from the standard AWS environment.

The endpoint, region and keys come only from AWS_ENDPOINT_URL(_S3), AWS_DEFAULT_REGION
(or AWS_REGION), AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, and, for
what those leave unset, the profile AWS_PROFILE names (default `default`) in the shared
files (~/.aws/credentials, ~/.aws/config, or the files AWS_SHARED_CREDENTIALS_FILE and
AWS_CONFIG_FILE name): never from sources.yaml, which is shared and versioned. The
secret is registered with the scrubber as soon as it is read.
"""
from __future__ import annotations

import configparser
import re
from dataclasses import dataclass
from pathlib import Path

from media_crawler.environment import aws_environment
from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.scrub import register_secret
from media_crawler.store.s3.sigv4 import Credentials

SCHEME = "s3://"
DEFAULT_REGION = "us-east-1"
# S3's bucket naming rules (lower case, digits, dots and hyphens, 3-63 characters).
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


def is_s3_uri(location: object) -> bool:
    return isinstance(location, str) and location.startswith(SCHEME)


@dataclass(frozen=True)
class BucketUri:
    bucket: str
    prefix: str  # no leading or trailing slash; "" for the bucket's top

    def __str__(self) -> str:
        return f"{SCHEME}{self.bucket}/{self.prefix}" if self.prefix else f"{SCHEME}{self.bucket}"


def parse_uri(uri: str) -> BucketUri:
    """`s3://BUCKET/PREFIX` -> BucketUri; ValueError naming what is wrong."""
    if not is_s3_uri(uri):
        raise ValueError(f"not an s3:// URI: {uri!r}")
    bucket, _, prefix = uri[len(SCHEME):].partition("/")
    if not _BUCKET.fullmatch(bucket):
        raise ValueError(f"{uri!r}: {bucket!r} is not an S3 bucket name (3-63 lower-case letters, digits, '.', '-')")
    prefix = prefix.strip("/")
    if any(part in ("", ".", "..") for part in prefix.split("/")) and prefix:
        raise ValueError(f"{uri!r}: the prefix has an empty, '.' or '..' segment")
    return BucketUri(bucket, prefix)


@dataclass(frozen=True)
class Connection:
    endpoint: str
    region: str
    credentials: Credentials


def connection_from_environment() -> Connection:
    """The endpoint, region and keys (module docstring); CrawlError(AUTH) when no keys are found."""
    env = aws_environment()
    profile = env.get("AWS_PROFILE", "default")
    credentials_file = _profile_section(Path(env.get("AWS_SHARED_CREDENTIALS_FILE", "~/.aws/credentials")), profile)
    config_file = _profile_section(Path(env.get("AWS_CONFIG_FILE", "~/.aws/config")),
                                   profile if profile == "default" else f"profile {profile}")
    shared = {**config_file, **credentials_file}
    access_key = env.get("AWS_ACCESS_KEY_ID") or shared.get("aws_access_key_id")
    secret_key = env.get("AWS_SECRET_ACCESS_KEY") or shared.get("aws_secret_access_key")
    token = env.get("AWS_SESSION_TOKEN") or shared.get("aws_session_token")
    for secret in (secret_key, token):
        register_secret(secret)
    if not access_key or not secret_key:
        raise CrawlError(ErrorClass.AUTH, "an s3:// store needs keys: set AWS_ACCESS_KEY_ID and "
                                          f"AWS_SECRET_ACCESS_KEY (or a profile {profile!r} in ~/.aws/credentials)")
    region = env.get("AWS_DEFAULT_REGION") or env.get("AWS_REGION") or shared.get("region") or DEFAULT_REGION
    endpoint = (env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or shared.get("endpoint_url")
                or f"https://s3.{region}.amazonaws.com")
    return Connection(endpoint.rstrip("/"), region, Credentials(access_key, secret_key, token))


def _profile_section(path: Path, section: str) -> dict[str, str]:
    parser = configparser.RawConfigParser()
    try:
        parser.read(path.expanduser(), encoding="utf-8")
    except (OSError, configparser.Error):
        return {}
    return dict(parser[section]) if parser.has_section(section) else {}

"""What the download engine is asked to do: one item's request, and the policy every request obeys.

The request is one item's: its URL, its .part, its headers and what is known
about it (the .part's validator, the announced size, how to re-sign an expired
URL). The policy is built once per platform in a download step
(pipeline/download.py) and holds the limits and the machinery around every attempt: byte and redirect
limits, where media may come from, timeouts, how many attempts, the shared rate
budget, and how to sleep between attempts.

download_to_part (fetcher.py) reads the fetch half of both; download_with_retries
(retry.py) the rest, and hands download_to_part the request with the URL and
validator the latest attempt left.
"""
from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, field
from typing import Callable, ContextManager, Mapping, Protocol

from media_crawler.models import item_record
from media_crawler.http import Timeouts
from media_crawler.net.policy import UrlPolicy

DEFAULT_CHUNK_SIZE = 256 * 1024
DEFAULT_MAX_REDIRECTS = 5
DEFAULT_MAX_ATTEMPTS = 5
# How long a rate_limited answer lowers a platform's rate, at least (or its Retry-After).
PENALTY_SECONDS = 60.0


class RateBudget(Protocol):
    """A per-platform request budget (ratebudget.py has a shared and an in-memory one):
    a request's policy carries it, and retry.py draws on it."""

    def acquire(self, platform: str) -> None:
        """Block until the platform's budget allows one more request."""

    def penalize(self, platform: str, factor: float = 0.5, seconds: float = PENALTY_SECONDS) -> None:
        """Lower the platform's rate for a while: it answered rate_limited."""

    def slot(self, platform: str) -> ContextManager[None]:
        """Hold one of the platform's concurrent-request slots."""


@item_record
class DownloadRequest:
    """One item to fetch into its staging .part.

    validator: the If-Range value recorded with an existing .part (None: the
    .part cannot be trusted and is restarted).
    expected_size: the size the source announced, if any; it narrows the
    policy's byte limit for this item (see body_limit).
    platform: whose rate budget the requests count against.
    resolve: returns a fresh media URL (the adapter's re-resolution) after a
    url_expired answer; without it, url_expired is final.
    keep_body: a small body may come back in memory for verification
    (DownloadResult.body); False when the caller already holds as many as it allows.
    """

    url: str
    part_path: str | os.PathLike[str]  # read as text (os.fspath) by the engine: a str or a Path alike
    headers: Mapping[str, str] = field(default_factory=dict)
    validator: str | None = None
    expected_size: int | None = None
    platform: str = "urls"
    resolve: Callable[[], str] | None = None
    keep_body: bool = True


@dataclass(frozen=True)
class DownloadPolicy:
    """The limits and retry machinery shared by every download of one platform in a download step.

    max_bytes: the most any item may write (config max_item_bytes); an item's
    announced size lowers it (body_limit).
    url_policy: where media may be fetched from, checked on every redirect hop.
    budget: the platform's shared request budget (None: unlimited, as in tests).
    sleep, rng: how waits between attempts happen and are jittered (tests pass
    a fake clock and a seeded generator; a download step passes a sleep that
    gives up the worker's turn while waiting).
    """

    max_bytes: int
    url_policy: UrlPolicy
    timeouts: Timeouts = Timeouts()
    max_redirects: int = DEFAULT_MAX_REDIRECTS
    chunk_size: int = DEFAULT_CHUNK_SIZE
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    budget: RateBudget | None = None
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random | None = None

    def body_limit(self, request: DownloadRequest) -> int:
        """The most bytes `request` may write (body_limit of max_bytes and its announced size)."""
        return body_limit(self.max_bytes, request.expected_size)


def body_limit(max_item_bytes: int, expected_size: int | None) -> int:
    """The most bytes a download may write: `max_item_bytes`, and when the source announced
    a size, that size plus a small tolerance (1%, at least 64 KiB). An item announced at
    10 KB must not pull a 2 GiB body (or inflate a gzip bomb) before verification finds
    it is not the announced file; a slightly stale size still gets its precise verdict
    (hash_mismatch, truncated_body) from verification."""
    if expected_size is None or expected_size <= 0:
        return max_item_bytes
    return min(max_item_bytes, expected_size + max(64 * 1024, expected_size // 100))

"""The error taxonomy: one table decides what every failure means.

    CrawlError(error_class, message, platform_code, retry_after, http_status)
    │
    ├── transient: retried per item with capped exponential backoff + jitter
    │     network_timeout  connection_reset  connection_refused  http_5xx
    │                       (these four say the server side is unwell: OUTAGE_CLASSES)
    │     rate_limited     (429, Retry-After, Bilibili -412/-352/-799,
    │                       Weibo 418/432, Facebook 4/17/32/613/80001 and
    │                       368, a temporary policy block)
    │                       also slows the platform's shared rate budget
    │     url_expired      (CDN 403 on a signed URL: re-resolve, then retry)
    │
    ├── bad body: retried from a clean .part
    │     truncated_body   hash_mismatch   bad_signature (HTML/JSON served as media)
    │     corrupt_media    (signature fine, but a decoder or the MP4/WebM walk disagrees)
    │
    ├── permanent: recorded, reported, never retried
    │     not_found        (404/410, Bilibili -404/62002/62004/62012/-403/-10403/-688,
    │                       Facebook 100/33, Weibo tombstones)
    │     too_large        disallowed_url (hostile: an unlisted internal address,
    │                       a malformed URL; docs/DESIGN.md "Refused URLs")
    │     unsupported_media (the announced bytes are no format we store)
    │
    ├── settings: refused by this deployment's lists, fetched once the host is listed
    │     host_not_allowed (failed, not gone: its message names the host and the
    │                       setting to change; a re-run after the change fetches it)
    │
    ├── alerting: no retry, a person must look
    │     auth             (401, Facebook 190, 10/200-299 and a 100 naming a permission or
    │                       token, Weibo ok:-100, Bilibili -101): stops the platform
    │     parse_error      (schema drift: the raw body is kept)
    │
    └── storage: stop admitting new work
          disk_full        storage_error

Domain code raises CrawlError; the Dagster layer maps a whole partition onto
RetryPolicy / Failure using `policy_for(...)`.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum

from media_crawler.scrub import excerpt, scrub_text


class ErrorClass(str, Enum):
    NETWORK_TIMEOUT = "network_timeout"
    CONNECTION_RESET = "connection_reset"
    CONNECTION_REFUSED = "connection_refused"
    HTTP_5XX = "http_5xx"
    RATE_LIMITED = "rate_limited"
    URL_EXPIRED = "url_expired"
    TRUNCATED_BODY = "truncated_body"
    HASH_MISMATCH = "hash_mismatch"
    BAD_SIGNATURE = "bad_signature"
    CORRUPT_MEDIA = "corrupt_media"
    NOT_FOUND = "not_found"
    TOO_LARGE = "too_large"
    DISALLOWED_URL = "disallowed_url"
    HOST_NOT_ALLOWED = "host_not_allowed"
    UNSUPPORTED_MEDIA = "unsupported_media"
    AUTH = "auth"
    PARSE_ERROR = "parse_error"
    DISK_FULL = "disk_full"
    STORAGE_ERROR = "storage_error"

    def __str__(self) -> str:  # log lines and ledger rows carry the plain name
        return self.value


class FinalState(str, Enum):
    """What an item becomes when this class ends its attempts."""

    FAILED = "failed"  # retries exhausted or alerting class: a rerun may redo it
    GONE = "gone"  # permanently unavailable: never retried, does not keep a partition red


@dataclass(frozen=True)
class ErrorPolicy:
    """What an error class means for the item and the run: retried or final, the backoff, and what it slows or stops."""

    retryable: bool
    final_state: FinalState
    backoff_base_s: float = 0.5
    backoff_cap_s: float = 30.0
    slows_platform: bool = False  # lower the shared request rate for a while
    stops_platform: bool = False  # no more requests to this platform in this run
    stops_admission: bool = False  # no new downloads anywhere (disk)
    restart_part: bool = False  # discard the staging .part before the next attempt
    outage: bool = False  # says the server side is unwell, not this item (download/outage.py)

    def backoff(self, attempt: int, retry_after: float | None = None, rng: random.Random | None = None) -> float:
        """Seconds to wait before attempt `attempt + 1` (attempt counts from 1).

        Retry-After wins when the server sent one: it knows when it will recover.
        Otherwise capped exponential backoff with full jitter (AWS-style), so many
        workers retrying at once do not hit the server in lockstep.
        """
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.backoff_cap_s * 4)
        ceiling = min(self.backoff_cap_s, self.backoff_base_s * (2 ** max(attempt - 1, 0)))
        return (rng or random).uniform(ceiling / 2, ceiling)


_TRANSIENT = ErrorPolicy(retryable=True, final_state=FinalState.FAILED)
_OUTAGE = ErrorPolicy(retryable=True, final_state=FinalState.FAILED, outage=True)
_BAD_BODY = ErrorPolicy(retryable=True, final_state=FinalState.FAILED, restart_part=True)
_PERMANENT = ErrorPolicy(retryable=False, final_state=FinalState.GONE)

POLICIES: dict[ErrorClass, ErrorPolicy] = {
    ErrorClass.NETWORK_TIMEOUT: _OUTAGE,
    ErrorClass.CONNECTION_RESET: _OUTAGE,
    ErrorClass.CONNECTION_REFUSED: _OUTAGE,
    ErrorClass.HTTP_5XX: _OUTAGE,
    ErrorClass.RATE_LIMITED: ErrorPolicy(
        retryable=True, final_state=FinalState.FAILED, backoff_base_s=2.0, backoff_cap_s=120.0, slows_platform=True
    ),
    ErrorClass.URL_EXPIRED: _TRANSIENT,
    ErrorClass.TRUNCATED_BODY: _TRANSIENT,  # resumable: keep the .part, Range continues it
    ErrorClass.HASH_MISMATCH: _BAD_BODY,
    ErrorClass.BAD_SIGNATURE: _BAD_BODY,
    ErrorClass.CORRUPT_MEDIA: _BAD_BODY,
    ErrorClass.NOT_FOUND: _PERMANENT,
    ErrorClass.TOO_LARGE: _PERMANENT,
    ErrorClass.DISALLOWED_URL: _PERMANENT,
    # Not retried in the run (the lists do not change under it), but failed, not gone:
    # the seen-set does not hold it, and the next run after the host is listed fetches it.
    ErrorClass.HOST_NOT_ALLOWED: ErrorPolicy(retryable=False, final_state=FinalState.FAILED),
    ErrorClass.UNSUPPORTED_MEDIA: _PERMANENT,
    ErrorClass.AUTH: ErrorPolicy(retryable=False, final_state=FinalState.FAILED, stops_platform=True),
    ErrorClass.PARSE_ERROR: ErrorPolicy(retryable=False, final_state=FinalState.FAILED),
    ErrorClass.DISK_FULL: ErrorPolicy(retryable=False, final_state=FinalState.FAILED, stops_admission=True),
    ErrorClass.STORAGE_ERROR: ErrorPolicy(retryable=False, final_state=FinalState.FAILED, stops_admission=True),
}

# Failures that say "the server side is unwell", not "this item is bad": the outage
# breaker (download/outage.py) and platform health (store/reports/platform_signals.py).
OUTAGE_CLASSES = frozenset(error_class for error_class, policy in POLICIES.items() if policy.outage)


@dataclass(frozen=True)
class AttemptLimits:
    """How many times an item is tried, in one place for every stage.

    in_step: downloads of one item inside one media_downloads step (its retries
    sleep the class's backoff or the server's Retry-After between them);
    per_item: downloads over all runs before a retryable item gives up (failed);
    after_bad_bytes: tries of an item whose staged bytes failed verification
    (hash, signature, decode) before it gives up: fewer, since a server that
    sends the wrong bytes eight times will not send the right ones the ninth.
    """

    in_step: int = 4
    per_item: int = 12
    after_bad_bytes: int = 8


ATTEMPTS = AttemptLimits()


# The one HTTP status -> class table, for media downloads and API answers alike.
# (media, api): the class a status means on its own; None for an API answer means
# "the platform's envelope decides" (Weibo's and Bilibili's 403 bodies carry codes
# that say auth or rate limit). A media file has no envelope: its 403 is a signed URL
# past its deadline, and any other 4xx means the file is not there.
_STATUS_CLASSES: dict[int, tuple[ErrorClass, ErrorClass | None]] = {
    401: (ErrorClass.AUTH, ErrorClass.AUTH),  # stops the platform
    403: (ErrorClass.URL_EXPIRED, None),  # re-resolve, then retry
    404: (ErrorClass.NOT_FOUND, ErrorClass.NOT_FOUND),
    408: (ErrorClass.NETWORK_TIMEOUT, ErrorClass.NETWORK_TIMEOUT),
    410: (ErrorClass.NOT_FOUND, ErrorClass.NOT_FOUND),
    429: (ErrorClass.RATE_LIMITED, ErrorClass.RATE_LIMITED),
}
_SERVER_ERROR = (ErrorClass.HTTP_5XX, ErrorClass.HTTP_5XX)
_OTHER_CLIENT_ERROR = (ErrorClass.NOT_FOUND, None)


def status_error(status: int, where: str, *, api: bool, retry_after: float | None = None) -> "CrawlError | None":
    """The error an HTTP status means by itself (None: a success, or an API answer whose
    body must decide). A media download succeeds with 200 or 206 only: anything else
    (a 204, a redirect left unfollowed) has no file in it. Retry-After travels with
    every class that retries."""
    if (200 <= status < 300) if api else status in (200, 206):
        return None
    if status >= 500:
        media_class, api_class = _SERVER_ERROR
    else:
        media_class, api_class = _STATUS_CLASSES.get(status, _OTHER_CLIENT_ERROR)
    error_class = api_class if api else media_class
    if error_class is None:
        return None
    wait = retry_after if POLICIES[error_class].retryable else None
    return CrawlError(error_class, where, retry_after=wait, http_status=status)


def policy_for(error_class: ErrorClass | str) -> ErrorPolicy:
    return POLICIES[ErrorClass(error_class)]


class CrawlError(Exception):
    """A classified failure. Its message is scrubbed here, whoever wrote it: it
    reaches the ledger, Dagster's event log, logs and `failures`, and a platform
    may have echoed a credential into it."""

    def __init__(
        self,
        error_class: ErrorClass | str,
        message: str,
        *,
        platform_code: str | int | None = None,
        retry_after: float | None = None,
        http_status: int | None = None,
    ) -> None:
        self.error_class = ErrorClass(error_class)
        self.message = scrub_text(message)
        self.platform_code = None if platform_code is None else excerpt(str(platform_code), 64)
        self.retry_after = retry_after
        self.http_status = http_status
        super().__init__(f"{self.error_class.value}: {self.message}")

    @property
    def policy(self) -> ErrorPolicy:
        return policy_for(self.error_class)

    def as_dict(self) -> dict:
        return {
            "error_class": self.error_class.value,
            "platform_code": self.platform_code,
            "message": self.message,
        }

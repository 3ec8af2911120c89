"""The ledger's state machine: the moves a stage makes on one row, each with the columns it writes.

A stage says what happened to an item (it downloaded, its attempt failed, it was
handed back untouched, ...) and `Ledger.apply` writes the transition's columns,
only where the stage still holds the row's lease. The column names, and which
state a failure ends in, live here and nowhere else outside store/. The states
themselves are named in store/ledger.py; the claims and heartbeats that take
and renew leases are Ledger methods and store/leases.py.

Each transition takes its timestamps when it is made, not when it is written:
the stages batch their writes (one transaction per batch), and a row's
finished_at or failed_at says when the item finished or failed.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

from media_crawler.models import item_record
from media_crawler import errors
from media_crawler.errors import CrawlError
from media_crawler.store.states import COMMITTED, DISCOVERED, DOWNLOADED, RETRY_WAIT, VERIFIED
from media_crawler.store.waits import halted_values, retry_values
from media_crawler.scrub import excerpt, excerpts_change_nothing


def _said(response: Mapping[str, Any] | None) -> str | None:
    """A media response's headers as the ledger keeps them: JSON, each text scrubbed and
    bounded (a hostile server chooses them)."""
    if not response:
        return None
    # Usually every value is a number or a short plain text (a content type, an ETag, a
    # date) that its excerpt would return as it is: then no excerpt is made (four per item).
    if type(response) is dict and excerpts_change_nothing(
            [value for value in response.values() if type(value) is not int], _SAID_LIMIT):
        return _SORTED_JSON(response)
    return _SORTED_JSON({name: value if isinstance(value, int) else excerpt(str(value), _SAID_LIMIT)
                         for name, value in response.items()})


_SAID_LIMIT = 300  # characters kept of each header value


# json.dumps(..., sort_keys=True) without making a JSONEncoder at each call (one per item
# downloaded): the encoder keeps no state between calls.
_SORTED_JSON = json.JSONEncoder(sort_keys=True).encode


class Transition(Protocol):
    def columns(self) -> dict[str, Any]:
        """The row's column values after the move (updated_at is Ledger.apply's)."""


_LEASE_ENDED = {"lease_owner": None, "lease_expires_at": None}
_NO_ERROR = {"error_class": None, "error_code": None, "error_message": None}


@item_record
class Downloaded:
    """The bytes are staged (a .part named after the row) and hashed; the verify stage is next."""

    sha256: str
    size: int
    etag: str | None  # the server's validator: a later resume of the .part sends it
    started_at: float
    attempts: int
    finished_at: float = field(default_factory=time.time)
    # What the completing response said (status, content_type, etag, last_modified, date):
    # kept past compaction for the archive's response record.
    response: Mapping[str, Any] | None = None

    def columns(self) -> dict[str, Any]:
        return {"state": DOWNLOADED, "sha256": self.sha256, "size": self.size, "etag": self.etag,
                "started_at": self.started_at, "finished_at": self.finished_at, "attempts": self.attempts,
                "media_response": _said(self.response), **_LEASE_ENDED, **_NO_ERROR}


@dataclass(frozen=True)
class AlreadyCommitted:
    """Not downloaded: the feed told the item's sha256 and the store holds those bytes."""

    sha256: str
    committed_at: float = field(default_factory=time.time)

    def columns(self) -> dict[str, Any]:
        return {"state": COMMITTED, "sha256": self.sha256, "committed_at": self.committed_at, **_LEASE_ENDED}


@dataclass(frozen=True)
class HandedBack:
    """Not attempted: `error` halted the item's platform (outage breaker, auth) or stopped
    admission (disk guard) in this run. Back to discovered, saying why it waits (store/waits.py)."""

    error: CrawlError
    at: float = field(default_factory=time.time)

    def columns(self) -> dict[str, Any]:
        return {"state": DISCOVERED, **_LEASE_ENDED, **halted_values(self.error, now=self.at)}


@dataclass(frozen=True)
class FailedAttempt:
    """An attempt failed with `error`: retry_wait until `retry_at` while the error is
    retryable and the stage grants a retry (retry_at not None), else the error class's
    final state (failed or gone)."""

    error: CrawlError
    attempts: int
    retry_at: float | None
    failed_at: float = field(default_factory=time.time)

    @classmethod
    def of_bad_bytes(cls, error: CrawlError, attempts: int) -> "FailedAttempt":
        """The staged bytes failed verification (the stage dropped the .part): downloaded
        again at once while the error is retryable and bad-bytes attempts remain."""
        retry = error.policy.retryable and attempts < errors.ATTEMPTS.after_bad_bytes
        return cls(error, attempts, time.time() if retry else None)

    @property
    def state(self) -> str:
        if self.error.policy.retryable and self.retry_at is not None:
            return RETRY_WAIT
        return self.error.policy.final_state.value

    def columns(self) -> dict[str, Any]:
        state = self.state
        return {"state": state, "attempts": self.attempts,
                "next_attempt_at": self.retry_at if state == RETRY_WAIT else None,
                "error_class": self.error.error_class.value, "error_code": self.error.platform_code,
                "error_message": excerpt(self.error.message, 2000), "failed_at": self.failed_at, **_LEASE_ENDED}


@dataclass(frozen=True)
class DownloadFailed:
    """A download's failed attempt: the .part's resume validator is kept for the next
    try, and a row going to retry_wait says it waits out its backoff (store/waits.py)."""

    failure: FailedAttempt
    validator: str | None

    @property
    def state(self) -> str:
        return self.failure.state

    def columns(self) -> dict[str, Any]:
        columns = {**self.failure.columns(), "etag": self.validator}
        if self.state == RETRY_WAIT:
            columns.update(retry_values(self.failure.error, failed_at=self.failure.failed_at))
        return columns


@dataclass(frozen=True)
class StagingLost:
    """The staged bytes vanished before verify or commit (reconcile, a crash before fsync):
    back to the download stage, with no hash to trust."""

    def columns(self) -> dict[str, Any]:
        return {"state": DISCOVERED, "sha256": None, "size": None}


@item_record
class Verified:
    """The staged bytes passed verification; the commit stage is next."""

    verified_at: float = field(default_factory=time.time)

    def columns(self) -> dict[str, Any]:
        return {"state": VERIFIED, "verified_at": self.verified_at}


@item_record
class Committed:
    """The blob is in the store under the row's sha256; the row is finished."""

    committed_at: float = field(default_factory=time.time)

    def columns(self) -> dict[str, Any]:
        return {"state": COMMITTED, "committed_at": self.committed_at, **_NO_ERROR}


@item_record
class Then:
    """Two moves of one row written as one update (fetch-urls verifies and commits in the
    download worker): the second's columns win where both write one."""

    first: Transition
    second: Transition

    def columns(self) -> dict[str, Any]:
        columns = self.first.columns()  # a dict of its own (every columns() makes a new one)
        columns.update(self.second.columns())
        return columns


@dataclass(frozen=True)
class Released:
    """`move`, and the end of the stage's lease on the row (verify and commit hold their
    rows by lease while they work; what they write hands the row on)."""

    move: Transition

    def columns(self) -> dict[str, Any]:
        columns = self.move.columns()
        columns.update(_LEASE_ENDED)
        return columns

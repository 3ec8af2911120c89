"""Per-item retries driven by the error taxonomy (errors.policy_for), never by guesswork.

`RetryLoop` is the generic part: run an operation, and after a CrawlError ask
the class's policy whether to try again and how long to wait (Retry-After
wins, else capped exponential backoff with jitter). `download_with_retries`
adds what a download needs between attempts:

- rate_limited: slow the platform's shared budget, wait per Retry-After;
- restart_part classes (bad_signature, hash_mismatch, corrupt_media): drop
  the .part and its validator, so the next attempt starts clean;
- truncated_body / network_timeout: keep the .part, the next attempt resumes
  (an item's first cut at once: only the rest of the body is asked for);
- url_expired: ask the request's `resolve()` for a fresh signed URL, retry without waiting;
- permanent classes: raise at once (and drop the .part of a `gone` item).

Waits happen outside the platform's concurrency slot, so a sleeping retry
never blocks another item's request.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, replace
from typing import Callable, Mapping, TypeVar

from media_crawler.models import item_record
from media_crawler.download.fetcher import DownloadResult, discard_part, download_to_part
from media_crawler.download.media_transport import CarriesMedia, MediaTransport
from media_crawler.download.request import (
    DEFAULT_MAX_ATTEMPTS, PENALTY_SECONDS, DownloadPolicy, DownloadRequest, RateBudget)
from media_crawler.errors import CrawlError, ErrorClass, FinalState
from media_crawler.http import redact_url

T = TypeVar("T")


def slow_down_if_asked(budget: RateBudget | None, platform: str, error: CrawlError) -> None:
    """A rate-limit answer, on a feed page or a media file, slows every request to its
    platform (the shared budget), for PENALTY_SECONDS or as long as its Retry-After
    asked, whichever is longer. The one place both request paths decide it."""
    if error.policy.slows_platform and budget is not None:
        budget.penalize(platform, seconds=max(PENALTY_SECONDS, error.retry_after or 0.0))


@item_record
class AttemptReport:
    attempt: int  # counts from 1
    error: CrawlError | None  # None: this attempt succeeded
    delay_s: float | None  # wait before the next attempt; None: no further attempt
    url: str | None = None  # redacted: safe to log
    validator: str | None = None  # what the .part can be resumed with (persist it with the .part)


# recover(error, proposed_delay) -> delay to use, or None to give up now.
Recover = Callable[[CrawlError, float], float | None]


class RetryLoop:
    def __init__(
        self,
        *,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        on_attempt: Callable[[AttemptReport], None] | None = None,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.max_attempts = max_attempts
        self.sleep = sleep
        self.rng = rng
        self.on_attempt = on_attempt

    def run(
        self,
        operation: Callable[[], T],
        *,
        recover: Recover | None = None,
        describe: Callable[[], Mapping[str, str | None]] = dict,
    ) -> T:
        """Call `operation` until it returns, fails permanently or runs out of attempts.

        describe: extra AttemptReport fields (url, validator) as of now.
        """
        for attempt in range(1, self.max_attempts + 1):
            try:
                result = operation()
            except CrawlError as error:
                delay = self.delay_after(error, attempt)
                if delay is not None and recover is not None:
                    try:
                        delay = recover(error, delay)
                    except CrawlError as recovery_error:  # e.g. re-resolution found the item deleted
                        self._report(AttemptReport(attempt, recovery_error, None, **describe()))
                        raise
                self._report(AttemptReport(attempt, error, delay, **describe()))
                if delay is None:
                    raise
                if delay > 0:
                    self.sleep(delay)
            else:
                self._report(AttemptReport(attempt, None, None, **describe()))
                return result
        raise AssertionError("unreachable: the last attempt either returns or raises")

    def delay_after(self, error: CrawlError, attempt: int) -> float | None:
        """Seconds to wait before attempt `attempt + 1`, or None when the class or the count says stop."""
        policy = error.policy
        if not policy.retryable or attempt >= self.max_attempts:
            return None
        return policy.backoff(attempt, error.retry_after, self.rng)

    def _report(self, report: AttemptReport) -> None:
        if self.on_attempt is not None:
            self.on_attempt(report)


def download_with_retries(
    session: CarriesMedia | MediaTransport,
    request: DownloadRequest,
    policy: DownloadPolicy,
    on_attempt: Callable[[AttemptReport], None] | None = None,
) -> DownloadResult:
    """download_to_part with classified retries; raises the last CrawlError when it gives up.

    on_attempt: told about every attempt (an item's own observer, so it is not
    part of the policy shared by the platform's items).
    """
    part_path, platform, budget = request.part_path, request.platform, policy.budget
    current = _Target(request.url, request.validator)

    def attempt() -> DownloadResult:
        # The request as the latest attempt left it (a first attempt: the request itself,
        # not a copy: replace() runs the dataclass's __init__ again).
        this = request if current.url is request.url and current.validator is request.validator else replace(
            request, url=current.url, validator=current.validator)
        try:
            if budget is None:
                return download_to_part(session, this, policy, current.remember)
            # The slot first, then the token: a token taken while still queueing for a
            # slot would be spent late, letting requests bunch up above the rate.
            with budget.slot(platform):
                budget.acquire(platform)
                return download_to_part(session, this, policy, current.remember)
        except CrawlError as error:
            slow_down_if_asked(budget, platform, error)  # even when this item retries no more: others still ask
            raise

    def recover(error: CrawlError, delay: float) -> float | None:
        if error.policy.restart_part:
            discard_part(part_path)
            current.validator = None
        if error.error_class is ErrorClass.URL_EXPIRED:
            if request.resolve is None:
                return None  # the same signed URL will keep answering 403
            current.url = request.resolve()
            return 0.0  # a fresh URL needs no cool-down
        if error.error_class is ErrorClass.TRUNCATED_BODY and current.validator and not current.resumed_at_once:
            # The first cut of an item resumes at once: the bytes already
            # received stay in the .part and only the rest is asked for. A
            # second cut backs off as the class says.
            current.resumed_at_once = True
            return 0.0
        return delay

    def describe() -> dict[str, str | None]:
        return {"url": redact_url(current.url), "validator": current.validator}

    loop = RetryLoop(max_attempts=policy.max_attempts, sleep=policy.sleep, rng=policy.rng, on_attempt=on_attempt)
    try:
        return loop.run(attempt, recover=recover, describe=describe)
    except CrawlError as error:
        if error.policy.final_state is FinalState.GONE:
            discard_part(part_path)  # never coming back: do not leave staging litter
        raise


@dataclass
class _Target:
    """What the next attempt fetches: the (possibly re-resolved) URL and the .part's validator."""

    url: str
    validator: str | None
    resumed_at_once: bool = False

    def remember(self, validator: str | None) -> None:
        self.validator = validator

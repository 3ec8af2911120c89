"""The error policy as errors.py's docstring draws it: which classes retry, from a clean .part
or not, which end gone or failed, which slow or stop a platform or stop admission; the
backoff's growth, cap and Retry-After; the one HTTP status table; and a CrawlError's scrubbing."""
from __future__ import annotations

import random

import pytest

from media_crawler import errors
from media_crawler.errors import CrawlError, ErrorClass, FinalState, policy_for, status_error

E = ErrorClass
TRANSIENT = {E.NETWORK_TIMEOUT, E.CONNECTION_RESET, E.CONNECTION_REFUSED, E.HTTP_5XX, E.RATE_LIMITED, E.URL_EXPIRED, E.TRUNCATED_BODY}
BAD_BODY = {E.HASH_MISMATCH, E.BAD_SIGNATURE, E.CORRUPT_MEDIA}
PERMANENT = {E.NOT_FOUND, E.TOO_LARGE, E.DISALLOWED_URL, E.UNSUPPORTED_MEDIA}
ALERTING = {E.AUTH, E.PARSE_ERROR}
STORAGE = {E.DISK_FULL, E.STORAGE_ERROR}
OUTAGE = {E.NETWORK_TIMEOUT, E.CONNECTION_RESET, E.CONNECTION_REFUSED, E.HTTP_5XX}  # the docstring's four
SETTING = {E.HOST_NOT_ALLOWED}  # refused by this deployment's lists: failed, fetched once they change


def test_every_class_is_in_exactly_one_branch_of_the_tree():
    branches = [TRANSIENT, BAD_BODY, PERMANENT, ALERTING, STORAGE, SETTING]
    assert sum(len(branch) for branch in branches) == len(E) and set().union(*branches) == set(E)


@pytest.mark.parametrize("error_class", sorted(E, key=lambda c: c.value), ids=lambda c: c.value)
def test_each_class_does_what_its_branch_says(error_class):
    policy = policy_for(error_class)
    assert policy.retryable == (error_class in TRANSIENT | BAD_BODY)
    assert policy.final_state is (FinalState.GONE if error_class in PERMANENT else FinalState.FAILED)
    assert policy.restart_part == (error_class in BAD_BODY)  # a cut body resumes; wrong bytes start over
    assert policy.slows_platform == (error_class is E.RATE_LIMITED)
    assert policy.stops_platform == (error_class is E.AUTH)
    assert policy.stops_admission == (error_class in STORAGE)
    assert policy.outage == (error_class in OUTAGE)  # the server side is unwell, not this item
    assert (error_class in errors.OUTAGE_CLASSES) == (error_class in OUTAGE)
    assert policy_for(error_class.value) is policy and str(error_class) == error_class.value


def test_backoff_doubles_from_its_base_with_jitter_up_to_its_cap():
    policy, rng = policy_for(E.HTTP_5XX), random.Random(3)
    for attempt in range(1, 12):
        ceiling = min(policy.backoff_cap_s, policy.backoff_base_s * 2 ** (attempt - 1))
        waits = [policy.backoff(attempt, rng=rng) for _ in range(50)]
        assert all(ceiling / 2 <= wait <= ceiling for wait in waits), (attempt, min(waits), max(waits))
    assert policy.backoff(1, rng=random.Random(1)) <= policy.backoff_base_s < policy.backoff(3, rng=random.Random(1))
    assert policy.backoff(50, rng=random.Random(1)) >= policy.backoff_cap_s / 2
    assert policy.backoff(0, rng=random.Random(1)) <= policy.backoff_base_s  # attempt 0 is treated as the first
    # The jitter comes from the caller's generator when given (reproducible), else the module's.
    assert policy.backoff(4, rng=random.Random(5)) == policy.backoff(4, rng=random.Random(5))
    assert policy.backoff_base_s <= policy.backoff(2) <= 2 * policy.backoff_base_s


def test_a_rate_limit_backs_off_longer_than_a_server_error():
    limited, server = policy_for(E.RATE_LIMITED), policy_for(E.HTTP_5XX)
    assert limited.backoff_base_s > server.backoff_base_s and limited.backoff_cap_s > server.backoff_cap_s


def test_retry_after_wins_never_negative_and_bounded():
    policy = policy_for(E.RATE_LIMITED)
    assert policy.backoff(1, retry_after=7.5) == 7.5
    assert policy.backoff(9, retry_after=0.0) == 0.0
    assert policy.backoff(1, retry_after=-3) == 0.0
    assert policy.backoff(1, retry_after=10**9) == policy.backoff_cap_s * 4


def test_the_attempt_limits_are_ordered_as_documented():
    limits = errors.ATTEMPTS
    assert 1 <= limits.in_step < limits.per_item and 1 <= limits.after_bad_bytes < limits.per_item


@pytest.mark.parametrize("status, media, api", [
    (200, None, None), (206, None, None), (204, E.NOT_FOUND, None), (302, E.NOT_FOUND, None),
    (401, E.AUTH, E.AUTH), (403, E.URL_EXPIRED, None), (404, E.NOT_FOUND, E.NOT_FOUND),
    (408, E.NETWORK_TIMEOUT, E.NETWORK_TIMEOUT), (410, E.NOT_FOUND, E.NOT_FOUND), (418, E.NOT_FOUND, None),
    (429, E.RATE_LIMITED, E.RATE_LIMITED), (499, E.NOT_FOUND, None), (500, E.HTTP_5XX, E.HTTP_5XX),
    (503, E.HTTP_5XX, E.HTTP_5XX), (599, E.HTTP_5XX, E.HTTP_5XX),
])
def test_the_status_table_for_media_and_api_answers(status, media, api):
    for is_api, expected in ((False, media), (True, api)):
        error = status_error(status, "GET x", api=is_api)
        assert (error.error_class if error else None) is expected, (status, is_api)
        if error is not None:
            assert error.http_status == status and error.message == "GET x"


def test_retry_after_travels_only_with_classes_that_retry():
    assert status_error(429, "x", api=False, retry_after=12.0).retry_after == 12.0
    assert status_error(503, "x", api=True, retry_after=3.0).retry_after == 3.0
    assert status_error(404, "x", api=False, retry_after=12.0).retry_after is None
    assert status_error(401, "x", api=True, retry_after=12.0).retry_after is None


def test_a_crawl_error_scrubs_its_message_and_code_whoever_wrote_them():
    error = CrawlError("auth", "GET https://graph.example.test/x?access_token=s3cr3t-value failed",
                       platform_code="token=s3cr3t-value", retry_after=2.0, http_status=401)
    assert error.error_class is E.AUTH and error.policy is policy_for(E.AUTH)
    assert "s3cr3t-value" not in error.message and "graph.example.test" in error.message
    assert error.platform_code == "token=***"
    assert CrawlError(E.PARSE_ERROR, "drift", platform_code="9" * 100).platform_code == "9" * 64
    assert (error.retry_after, error.http_status) == (2.0, 401)
    assert str(error) == f"auth: {error.message}"
    assert error.as_dict() == {"error_class": "auth", "platform_code": error.platform_code, "message": error.message}
    assert CrawlError(E.NOT_FOUND, "gone").platform_code is None
    assert CrawlError(E.NOT_FOUND, "gone", platform_code=-404).platform_code == "-404"

"""Which whole-step failures Dagster's RetryPolicy may retry (errors.py decides).

A step's RetryPolicy is for what time can fix: a platform answering 5xx, a process
killed mid-step. A missing sources file, a credential not set, an answer of a shape
we cannot read or a URL the policy refuses gives the same answer a second later, so
retrying only hides the reason behind three more attempts and their waits. Those
fail the step at once (`Failure(allow_retries=False)`), their class and one-line
reason in the description, which is what `crawl` prints and the UI shows.
"""
from __future__ import annotations

from contextlib import contextmanager

from dagster import Failure

from media_crawler.config import ConfigError
from media_crawler.errors import CrawlError
from media_crawler.scrub import scrub_text

CONFIG_ERROR = "config_error"  # the class cli.py gives a ConfigError too


def final_failure(error_class: str, message: str) -> Failure:
    return Failure(description=scrub_text(f"{error_class}: {message}"), allow_retries=False)


@contextmanager
def failing_at_once():
    """Re-raise a configuration error or a CrawlError of a class that does not retry as a
    Failure without retries; anything else (retryable classes, the unforeseen) as it is."""
    try:
        yield
    except ConfigError as error:
        raise final_failure(CONFIG_ERROR, str(error)) from None
    except CrawlError as error:
        if error.policy.retryable:
            raise
        raise final_failure(error.error_class.value, error.message) from None

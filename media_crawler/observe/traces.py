"""Stack traces stay out of what an operator reads, unless a developer asks for them.

A classified failure already says what failed in one line; Dagster appends the
whole "Stack Trace:" to its failure events, and a logged exception carries its
traceback. Both are kept where they belong (Dagster's event log keeps the
trace), and left out of the command's output and the JSON log lines unless
MEDIA_CRAWLER_DEBUG=1.
"""
from __future__ import annotations

from media_crawler.environment import debug_enabled

__all__ = ["debug_enabled", "exception_summary", "failure_message", "without_stack_trace"]
_DAGSTER_TRACE_MARK = "\nStack Trace:"
_CAUSE_MARKS = ("\nThe above exception was caused by", "\nThe above exception occurred during")


def without_stack_trace(text: str) -> str:
    """`text` up to Dagster's "Stack Trace:" (and any chained cause), trailing blank lines dropped."""
    for mark in (_DAGSTER_TRACE_MARK, *_CAUSE_MARKS):
        index = text.find(mark)
        if index >= 0:
            text = text[:index]
    return text.rstrip()


def exception_summary(formatted: str) -> str:
    """The last line of a formatted traceback: `ValueError: what went wrong`."""
    lines = [line for line in formatted.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def failure_message(dagster_error_message: str) -> str:
    """A step failure's message as a person reads it: no trace, no prefix naming Dagster's Failure class."""
    # Here, not at the top: every command's logging imports this module, and only a
    # Dagster step's failure needs that module (its NamedTuples cost start-up: issue 31).
    from media_crawler.store.dagster_private import FAILURE_PREFIX

    text = without_stack_trace(dagster_error_message).strip()
    if text.startswith(FAILURE_PREFIX):
        text = text[len(FAILURE_PREFIX):]
    return text

"""Per-item stage events: the JSON log lines an operator greps at night.

Correlation ids (run_id, partition, step) come from a context variable the
Dagster layer sets once per step, so domain code does not pass them around.
"""
from __future__ import annotations

import contextvars
import logging
from contextlib import contextmanager
from typing import Any, Iterator

from media_crawler.observe.scrub import scrub_text, scrub_url

ITEM_LOG = logging.getLogger("media_crawler.items")
_RESERVED = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}
_CORRELATION: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("media_crawler_correlation", default={})


@contextmanager
def correlation(**ids: Any) -> Iterator[None]:
    token = _CORRELATION.set({**_CORRELATION.get(), **{k: v for k, v in ids.items() if v is not None}})
    try:
        yield
    finally:
        _CORRELATION.reset(token)


def current_correlation() -> dict[str, Any]:
    return dict(_CORRELATION.get())


def log_item(*, stage: str, platform: str, canonical_url: str, outcome: str, level: int | None = None,
             **fields: Any) -> None:
    """One line per item per stage. Failures log at warning, the rest at info."""
    extra = {**_CORRELATION.get(), "stage": stage, "platform": platform,
             "canonical_url": scrub_url(canonical_url), "outcome": outcome}
    for key, value in fields.items():
        if value is None:
            continue
        if key in _RESERVED:  # LogRecord refuses extras that shadow its own attributes
            key = f"error_{key}" if key == "message" else f"field_{key}"
        extra[key] = scrub_text(value) if isinstance(value, str) else value
    if level is None:
        level = logging.WARNING if outcome not in ("ok", "skipped") else logging.INFO
    ITEM_LOG.log(level, f"{stage} {outcome}", extra=extra)

"""Credentials checked before any work: a variable that sources.yaml names is set.

`platforms.<p>.credential_env` names the environment variables a platform needs.
When one is unset, every request would fail `auth` anyway, page after page, and the
failure would say nothing of the variable; re-running could not help. So a run
for that platform stops before its first request, with class `auth` and a message
naming the variable and the setting that names it (never a value: there is none).
The failure is recorded as each source's feed error of the day, so `failures`,
`status` and `health --ready` say it too, and the next walk that succeeds
resolves it like any other feed error.
"""
from __future__ import annotations

import time
from typing import Sequence

from media_crawler.config import unset_credential_messages
from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.models import DayWindow, Source
from media_crawler.observe.events import log_item
from media_crawler.pipeline.runtime import Runtime


def refuse_unset_credentials(runtime: Runtime, sources: Sequence[Source], window: DayWindow,
                             run_id: str | None = None) -> None:
    """Raise CrawlError(auth) naming the unset variables of the sources' platforms, after
    recording it as each source's feed error of the day; return when all are set."""
    missing = unset_credential_messages(runtime.config, sorted({source.platform for source in sources}))
    if not missing:
        return
    error = CrawlError(ErrorClass.AUTH, "; ".join(missing) + ": set it and re-run the partition")
    day = window.day.isoformat()
    started = time.monotonic()
    for source in sources:
        runtime.ledger.record_feed_error(source_key=source.key, day=day, platform=source.platform, error=error,
                                         run_id=run_id)
        log_item(stage="fetch", platform=source.platform, canonical_url=source.key, outcome="failed",
                 error_class=error.error_class.value, message=error.message,
                 duration_ms=(time.monotonic() - started) * 1000, source=source.key, day=day)
    raise error

"""Stages 3 and 4: verify staged downloads, then commit them into the blob store.

Both are idempotent. Verification re-reads the staged bytes (size, sha256,
magic bytes, image decode, MP4 boxes); a failure discards the .part and sends
the item back to the download stage. Commit is put-if-absent by content hash,
so a crash between the store's link and the ledger update is healed by the
next run, which finds the blob already there.
"""
from __future__ import annotations

import time

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.models import DayWindow, Source
from media_crawler.observe.events import log_item
from media_crawler.pipeline.report import StageReport
from media_crawler.pipeline.runtime import Runtime
from media_crawler.store.ledger import DISCOVERED, DOWNLOADED, VERIFIED, Ledger, Task

MAX_TOTAL_ATTEMPTS = 8


def verify_partition(runtime: Runtime, source: Source | None, window: DayWindow | None) -> StageReport:
    from media_crawler.verify.verify import verify_file

    report = StageReport("verify")
    changes = []
    for task in _tasks_in(runtime.ledger, source, window, DOWNLOADED):
        part = runtime.store.staging_path(task.staging_name)
        started = time.monotonic()
        if not part.exists():
            # The staged bytes vanished (reconcile, a crash before fsync): download again.
            changes.append((task.id, None, {"state": DISCOVERED, "sha256": None, "size": None}))
            report.add_failure(task.canonical_url, "storage_error", "staged file missing; re-queued", DISCOVERED)
            continue
        try:
            verify_file(part, kind=task.kind, expected_size=task.expected_size,
                        expected_sha256=task.expected_sha256, actual_sha256=task.sha256)
        except CrawlError as error:
            part.unlink(missing_ok=True)
            attempts = task.attempts + 1
            retry_at = time.time() if error.policy.retryable and attempts < MAX_TOTAL_ATTEMPTS else None
            values = Ledger.failed(error, attempts, retry_at)
            changes.append((task.id, None, values))
            report.add_failure(task.canonical_url, error.error_class.value, error.message, values["state"])
            _count_unfinished(report, values["state"])
            log_item(stage="verify", platform=task.platform, canonical_url=task.canonical_url, outcome="failed",
                     error_class=error.error_class.value, message=error.message, task_id=f"t_{task.id}",
                     attempt=attempts)
            continue
        duration = (time.monotonic() - started) * 1000
        report.ok += 1
        report.durations_ms.append(duration)
        changes.append((task.id, None, {"state": VERIFIED, "verified_at": time.time()}))
        log_item(stage="verify", platform=task.platform, canonical_url=task.canonical_url, outcome="ok",
                 task_id=f"t_{task.id}", duration_ms=round(duration, 1), bytes=task.size)
    runtime.ledger.apply(changes)
    return report


def commit_partition(runtime: Runtime, source: Source | None, window: DayWindow | None) -> StageReport:
    report = StageReport("commit")
    changes = []
    for task in _tasks_in(runtime.ledger, source, window, VERIFIED):
        part = runtime.store.staging_path(task.staging_name)
        started = time.monotonic()
        try:
            if not task.sha256:
                raise CrawlError(ErrorClass.STORAGE_ERROR, "verified row without a sha256")
            if not part.exists() and not runtime.store.has(task.sha256):
                changes.append((task.id, None, {"state": DISCOVERED, "sha256": None, "size": None}))
                report.add_failure(task.canonical_url, "storage_error", "staged file missing; re-queued", DISCOVERED)
                continue
            result = runtime.store.commit(part, task.sha256)
        except CrawlError as error:
            values = Ledger.failed(error, task.attempts + 1, None)
            changes.append((task.id, None, values))
            report.add_failure(task.canonical_url, error.error_class.value, error.message, values["state"])
            _count_unfinished(report, values["state"])
            log_item(stage="commit", platform=task.platform, canonical_url=task.canonical_url, outcome="failed",
                     error_class=error.error_class.value, message=error.message, task_id=f"t_{task.id}")
            if error.policy.stops_admission:
                break  # disk full or failing: stop touching the store
            continue
        duration = (time.monotonic() - started) * 1000
        report.durations_ms.append(duration)
        if result.created:
            report.ok += 1
            report.bytes += result.size
        else:
            report.extra["items_deduplicated"] = report.extra.get("items_deduplicated", 0) + 1
        changes.append((task.id, None, {"state": "committed", "committed_at": time.time(), "error_class": None,
                                        "error_code": None, "error_message": None}))
        log_item(stage="commit", platform=task.platform, canonical_url=task.canonical_url, outcome="ok",
                 task_id=f"t_{task.id}", sha256=task.sha256, bytes=result.size, deduplicated=not result.created,
                 duration_ms=round(duration, 1))
    runtime.ledger.apply(changes)
    return report


def _tasks_in(ledger: Ledger, source: Source | None, window: DayWindow | None, state: str) -> list[Task]:
    return ledger.tasks(source_key=source.key if source else None, day=window.day.isoformat() if window else None,
                        states=[state])


def _count_unfinished(report: StageReport, state: str) -> None:
    if state == "gone":
        report.gone += 1
    else:
        report.still_unfinished += 1

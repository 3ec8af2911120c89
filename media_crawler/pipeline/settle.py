"""Settling one downloaded item: verify its staged bytes, commit them into the store, and
the ledger move and log lines that say so.

One path for both ways the stages run: the Dagster stages (verify_commit.py, over the
rows a partition holds in `downloaded` or `verified`) and fetch-urls (fetch_list.py, in
the download worker right after the download). Both pass `max_item_bytes` to the
verifier, and a commit failure that stops admission (a full or failing disk) is the
caller's cue to stop touching the store.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from media_crawler.crashpoints import AFTER_LINK_BEFORE_LEDGER, crash_point
from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.observe.events import log_item
from media_crawler.pipeline.runtime import Runtime
from media_crawler.store.blob_store import StoredBlob
from media_crawler.store.ledger import Task
from media_crawler.store.transitions import Committed, FailedAttempt, Transition, Verified
from media_crawler.verify.verify import Written, verify_file


@dataclass
class Settled:
    """What one verify or commit did: the row's move, the stage lines to log (now, or after
    the download line when pipelined), the failure if any, and the blob a commit stored."""

    transition: Transition
    lines: list[dict[str, Any]]
    error: CrawlError | None = None
    stored: StoredBlob | None = None
    duration_ms: float = field(default=0.0)

    def emit(self) -> None:
        for fields in self.lines:
            log_item(**fields)


def verify_staged(runtime: Runtime, task: Task, *, sha256: str | None, size: int | None, attempts: int,
                  body: bytes | None = None, part: Path | None = None) -> Settled:
    """Verify the task's .part (size, hash, media decode); a failure drops the .part, and the
    item goes back to the download stage or ends in its class's final state.
    body: the .part's bytes, when the worker that wrote them holds them (verify.py `verify_file`).
    part: the task's staging path, when the caller has it already (verify then commit)."""
    part = part or runtime.store.staging_path(task.staging_name)
    started = time.monotonic()
    try:
        verify_file(part, kind=task.kind, expected_size=task.expected_size, expected_sha256=task.expected_sha256,
                    max_bytes=runtime.config.max_item_bytes,
                    allow_unknown=runtime.allows_unknown_formats(task.platform), written=Written(sha256, body))
    except CrawlError as error:
        part.unlink(missing_ok=True)
        failed = FailedAttempt.of_bad_bytes(error, attempts + 1)
        duration = (time.monotonic() - started) * 1000
        return Settled(failed, [_line(task, "verify", "failed", error_class=error.error_class.value,
                                      message=error.message, attempt=attempts + 1, duration_ms=duration,
                                      bytes=size, final_state=failed.state)], error, duration_ms=duration)
    duration = (time.monotonic() - started) * 1000
    return Settled(Verified(), [_line(task, "verify", "ok", attempt=attempts, duration_ms=duration, bytes=size)],
                   duration_ms=duration)


def commit_staged(runtime: Runtime, task: Task, *, sha256: str | None, size: int | None, attempts: int,
                  hashed_here: bool = False, part: Path | None = None) -> Settled:
    """Put the task's .part into the store under `sha256` (put-if-absent).

    hashed_here: this process hashed and fsynced the bytes a moment ago (fetch-urls'
    worker, under the task's lease), so the store neither re-hashes nor fsyncs them
    again; a .part of an earlier run is re-hashed and fsynced. part: as verify_staged's."""
    part = part or runtime.store.staging_path(task.staging_name)
    started = time.monotonic()
    try:
        if not sha256:
            raise CrawlError(ErrorClass.STORAGE_ERROR, "verified row without a sha256")
        if hashed_here:
            stored = runtime.store.put_if_absent(part, sha256, verify_hash=False, synced=True, size=size)
        else:
            stored = runtime.store.put_if_absent(part, sha256)
        crash_point(AFTER_LINK_BEFORE_LEDGER)  # the next run finds the blob and only updates the row
    except CrawlError as error:
        failed = FailedAttempt(error, attempts + 1, None)
        duration = (time.monotonic() - started) * 1000
        return Settled(failed, [_line(task, "commit", "failed", error_class=error.error_class.value,
                                      message=error.message, attempt=attempts + 1, duration_ms=duration,
                                      bytes=size, final_state=failed.state)], error, duration_ms=duration)
    duration = (time.monotonic() - started) * 1000
    return Settled(Committed(), [_line(task, "commit", "ok", attempt=attempts, sha256=sha256, bytes=stored.size,
                                       deduplicated=not stored.created, duration_ms=duration)],
                   stored=stored, duration_ms=duration)


def _line(task: Task, stage: str, outcome: str, **fields: Any) -> dict[str, Any]:
    return {"stage": stage, "platform": task.platform, "canonical_url": task.canonical_url, "outcome": outcome,
            "task_id": task.id, **fields}

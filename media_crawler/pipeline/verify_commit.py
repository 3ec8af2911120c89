"""Stages 3 and 4: verify staged downloads, then commit them into the blob store.

Both are idempotent. Verification re-reads the staged bytes (size, sha256,
magic bytes, image decode, MP4 boxes); a failure discards the .part and sends
the item back to the download stage. Commit is put-if-absent by content hash,
so a crash between the store's link and the ledger update is healed by the
next run, which finds the blob already there.
"""
from __future__ import annotations

from media_crawler.models import DayWindow
from media_crawler.observe.events import log_item
from media_crawler.pipeline.report import StageReport
from media_crawler.pipeline.runtime import Runtime
from media_crawler.pipeline.scope import Sources, source_keys
from media_crawler.crashpoints import AFTER_COMMIT_LEDGER, AFTER_VERIFY, crash_point
from media_crawler.pipeline.leases import LeaseKeeper
from media_crawler.pipeline.liveness import lease_owner
from media_crawler.store.leases import claim_in_state
from media_crawler.pipeline.settle import commit_staged, verify_staged
from media_crawler.store.ledger import DISCOVERED, DOWNLOADED, GONE, VERIFIED, Ledger, Task
from media_crawler.store.transitions import Released, StagingLost


def verify_partition(runtime: Runtime, source: Sources, window: DayWindow | None) -> StageReport:
    # Leased, so a second run of the partition at the same time verifies other rows, not these.
    owner = lease_owner(None)
    with LeaseKeeper(runtime.ledger, owner):
        report, changes = _verify(runtime, _claim(runtime.ledger, source, window, DOWNLOADED, owner))
        crash_point(AFTER_VERIFY)
        _apply_as(runtime.ledger, owner, changes)
    return report



def _staging_lost(report: StageReport, changes: list, task: Task) -> None:
    """The item's staged bytes are gone: back to download, said once in the report and the log."""
    changes.append((task.id, StagingLost()))
    report.add_failure(task.canonical_url, "storage_error", "staged file missing; re-queued", DISCOVERED)
    _log_requeued(report.stage, task)


def _settled(report: StageReport, changes: list, task: Task, settled) -> bool:
    """Record one settled item (its ledger move, its log lines, a failure in the report); True when it passed."""
    changes.append((task.id, settled.transition))
    settled.emit()
    if settled.error is None:
        return True
    report.add_failure(task.canonical_url, settled.error.error_class.value, settled.error.message,
                       settled.transition.state)
    _count_unfinished(report, settled.transition.state)
    return False

def _verify(runtime: Runtime, tasks: list[Task]) -> tuple[StageReport, list]:
    report = StageReport("verify")
    changes = []
    for task in tasks:
        part = runtime.store.staging_path(task.staging_name)
        if not part.exists():
            # The staged bytes vanished (reconcile, a crash before fsync): download again.
            _staging_lost(report, changes, task)
            continue
        settled = verify_staged(runtime, task, sha256=task.sha256, size=task.size, attempts=task.attempts)
        if not _settled(report, changes, task, settled):
            continue
        report.ok += 1
        report.durations_ms.append(settled.duration_ms)
    return report, changes


def commit_partition(runtime: Runtime, source: Sources, window: DayWindow | None) -> StageReport:
    owner = lease_owner(None)
    with LeaseKeeper(runtime.ledger, owner):
        # One flush of the store's folders for the batch, before its rows say committed.
        with runtime.store.deferred_sync():
            report, changes = _commit(runtime, _claim(runtime.ledger, source, window, VERIFIED, owner))
        _apply_as(runtime.ledger, owner, changes)
        crash_point(AFTER_COMMIT_LEDGER)
    return report


def _commit(runtime: Runtime, tasks: list[Task]) -> tuple[StageReport, list]:
    # One put at a time. On an object store the download step commits in place
    # (settle_in_place.py), so this loop only takes what an older run left verified: too
    # little for a pool of overlapping uploads to pay for (bench/S3_COMMIT.md says what one did).
    report = StageReport("commit")
    changes = []
    for task in tasks:
        part = runtime.store.staging_path(task.staging_name)
        if task.sha256 and not part.exists() and not runtime.store.exists(task.sha256):
            _staging_lost(report, changes, task)
            continue
        settled = commit_staged(runtime, task, sha256=task.sha256, size=task.size, attempts=task.attempts)
        if not _settled(report, changes, task, settled):
            if settled.error.policy.stops_admission:
                break  # disk full or failing: stop touching the store
            continue
        report.durations_ms.append(settled.duration_ms)
        if settled.stored.created:
            report.ok += 1
            report.bytes += settled.stored.size
        else:
            report.extra["items_deduplicated"] = report.extra.get("items_deduplicated", 0) + 1
    return report, changes


def _claim(ledger: Ledger, source: Sources, window: DayWindow | None, state: str, owner: str) -> list[Task]:
    return claim_in_state(ledger, state, source_key=source_keys(source),
                          day=window.day.isoformat() if window else None, owner=owner)


def _apply_as(ledger: Ledger, owner: str, changes: list) -> None:
    """Apply the stage's (task_id, transition) moves only where `owner` still holds the lease, and end it."""
    ledger.apply([(task_id, owner, Released(transition)) for task_id, transition in changes])


def _count_unfinished(report: StageReport, state: str) -> None:
    if state == GONE:
        report.gone += 1
    else:
        report.still_unfinished += 1


def _log_requeued(stage: str, task: Task) -> None:
    log_item(stage=stage, platform=task.platform, canonical_url=task.canonical_url, outcome="requeued",
             task_id=task.id, attempt=task.attempts, duration_ms=0.0, error_class="storage_error",
             message="staged file missing; sent back to the download stage")

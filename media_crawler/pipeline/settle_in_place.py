"""Verify and commit an item in the download worker that holds its bytes: the download step
of a store with no shared disk, and fetch-urls.

A staged file (`.part`) is a file on the disk of the machine that downloaded it. When the
Dagster steps of one run land on different machines (the Celery executor hands out each
step on its own, defs/celery.py) and the store is an object store, nothing but the bucket
is shared: a verify or commit step on another machine cannot see the .part. So with an
object store the download step settles each item where it is, right after its download
(verify, then upload put-if-absent), and the row's moves downloading → downloaded →
verified → committed are one ledger write: the bytes cross machines only through the
bucket. The verify and commit steps then find nothing of that run to do; they remain
for rows an older run left downloaded or verified, and a row whose .part is not on their
machine goes back to the download stage (verify_commit.py, `StagingLost`): downloaded
again wherever that runs, never waited for. docs/DESIGN.md "Workers that share no disk".

A filesystem store keeps the four steps apart, as before: its staging folder sits beside
its blobs (a link commits), so machines that share the store share the staging too.
"""
from __future__ import annotations

from media_crawler.crashpoints import AFTER_VERIFY, crash_point
from media_crawler.models import DayWindow
from media_crawler.pipeline.download import ItemOutcome, Workers, download_partition
from media_crawler.pipeline.report import StageReport
from media_crawler.pipeline.runtime import Runtime
from media_crawler.pipeline.scope import Sources
from media_crawler.pipeline.settle import Settled, commit_staged, verify_staged
from media_crawler.store.open_store import is_object_store
from media_crawler.store.transitions import Then


def settles_in_place(runtime: Runtime) -> bool:
    """The download step verifies and commits each item itself: the store shares no disk
    with the staging folder (an object store), so no later step on another machine could."""
    return is_object_store(runtime.config.store_location)


def download_stage(runtime: Runtime, sources: Sources, window: DayWindow | None, *, run_id: str | None,
                   ignore_backoff: bool) -> StageReport:
    """The Dagster download step: download_partition, settling each item in place when
    `settles_in_place` (the report then counts what was committed and deduplicated)."""
    if not settles_in_place(runtime):
        return download_partition(runtime, sources, window, run_id=run_id, ignore_backoff=ignore_backoff)
    workers = Workers(after_download=lambda item: verify_and_commit(runtime, item))
    with runtime.store.deferred_sync():
        return download_partition(runtime, sources, window, run_id=run_id, ignore_backoff=ignore_backoff,
                                  workers=workers)


def verify_and_commit(runtime: Runtime, item: ItemOutcome) -> Settled:
    """Stages 3 and 4 for one item, in the download worker, on the .part it just wrote:
    the settle path the Dagster stages take too (pipeline/settle.py), with one difference,
    and why it is safe: the store does not re-hash the .part. Its sha256 was computed by
    this worker over the very bytes it wrote and fsynced a moment ago, and the staging
    name belongs to this task's lease, so nothing else has written to it; a re-read would
    come from the page cache and prove nothing more. For the same reason it is not fsynced
    twice. (commit_partition, which takes .parts of earlier runs, still re-hashes and fsyncs.)
    Likewise a small file is verified from the bytes the worker wrote (`DownloadResult.body`),
    not read back from the page cache.
    The link's folders are made durable once per ledger batch, before the batch that
    says committed (download.py `_apply`, inside the caller's `deferred_sync`); the file's
    bytes were fsynced before the link.
    """
    task, result = item.task, item.result
    part = runtime.store.staging_path(task.staging_name)
    verified = verify_staged(runtime, task, sha256=result.sha256, size=result.size, attempts=item.attempts,
                             body=result.body, part=part)
    if verified.error is not None:
        return verified
    crash_point(AFTER_VERIFY)
    committed = commit_staged(runtime, task, sha256=result.sha256, size=result.size, attempts=item.attempts,
                              hashed_here=True, part=part)
    return Settled(Then(verified.transition, committed.transition), verified.lines + committed.lines,
                   committed.error, committed.stored)

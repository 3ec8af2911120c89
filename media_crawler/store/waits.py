"""Why an unfinished item waits: one reason per row, from the ledger's timestamps.

Most reasons follow from a row's state and stamps alone; two need the stage to
say so, and it does where the item starts waiting (pipeline/download.py, through
the transitions of store/transitions.py):

- a retryable failure puts the row in `retry_wait` until `next_attempt_at`;
  `retry_values()` adds the reason, since when, its error class and the
  server's Retry-After (`retry_after_s`), which the ledger did not keep;
- an item handed back untouched because its platform was halted in the run
  (the outage breaker, an auth failure) or the disk guard stopped admission
  goes back to `discovered`, which would read as plain queued work:
  `halted_values()` says it waits for the platform (or the disk) instead.

The reasons (bounded: they are metric labels), in the order a row meets them,
each with the time its wait is measured from:

- awaiting_run: ready (discovered, a retry whose backoff passed, downloaded or
  verified between stages) and no run holds it: it waits for the sensor's
  re-request, a schedule or an operator. Since it became ready.
- run_queued: ready, and a run of its partition is queued in Dagster, not yet
  dequeued. Since it became ready.
- step_pending: ready, and its partition's run is running but no step holds the
  row yet (an earlier step, a step waiting to start or for a pool slot).
  Since it became ready.
- worker_slot: leased by a live stage, waiting for (or holding) one of its
  worker threads. Since the lease was taken.
- rate_budget: leased by a live download stage while its platform's shared rate
  budget is what binds (slowed after a 429, or drained). Since the lease was taken.
- retry_backoff: retry_wait before next_attempt_at (the Retry-After when the
  server sent one). Since the failure.
- platform_halted: handed back untouched, its platform halted in the run
  (outage breaker, auth). Since the halt.
- disk_guard: handed back untouched, the store's disk below min_free_bytes.
  Since the halt.
- uncertain_lease: downloading under a lease that expired, its worker stopped
  renewing. Since the lease expired.
- operator: failed (retries exhausted, or an alerting class: auth, schema
  drift); a person, or the next run of its partition, must act. Since the failure.

`run_queued` and `step_pending` need Dagster's run storage (observe/dagster_runs.py);
without it both read as `awaiting_run`.
"""
from __future__ import annotations

import time
from typing import Any

from media_crawler.errors import CrawlError

AWAITING_RUN = "awaiting_run"
RUN_QUEUED = "run_queued"
STEP_PENDING = "step_pending"
WORKER_SLOT = "worker_slot"
RATE_BUDGET = "rate_budget"
RETRY_BACKOFF = "retry_backoff"
PLATFORM_HALTED = "platform_halted"
DISK_GUARD = "disk_guard"
UNCERTAIN_LEASE = "uncertain_lease"
OPERATOR = "operator"
REASONS = (AWAITING_RUN, RUN_QUEUED, STEP_PENDING, WORKER_SLOT, RATE_BUDGET, RETRY_BACKOFF, PLATFORM_HALTED,
           DISK_GUARD, UNCERTAIN_LEASE, OPERATOR)
# Reasons a stage writes into `wait_reason` of a row it hands back to `discovered`.
HALT_REASONS = (PLATFORM_HALTED, DISK_GUARD)


def halted_values(error: CrawlError, now: float | None = None) -> dict[str, Any]:
    """Ledger values for an item handed back untouched because `error` halted its platform
    (outage breaker, auth) or stopped admission (disk guard)."""
    reason = DISK_GUARD if error.policy.stops_admission else PLATFORM_HALTED
    return {"wait_reason": reason, "wait_since": time.time() if now is None else now,
            "wait_cause": error.error_class.value}


def retry_values(error: CrawlError, failed_at: float) -> dict[str, Any]:
    """Ledger values for a failed download attempt going to retry_wait (transitions.DownloadFailed):
    it waits out its backoff, with the server's Retry-After when it sent one."""
    return {"wait_reason": RETRY_BACKOFF, "wait_since": failed_at, "wait_cause": error.error_class.value,
            "retry_after_s": error.retry_after}

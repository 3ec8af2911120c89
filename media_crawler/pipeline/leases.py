"""The pipeline's side of leases: the keeper that renews a stage's leases while it runs, and
the release of leases held by workers that died (their SQL: store/leases.py).

The download stage leases the rows it works on (pipeline/download.py). Verify
and commit lease theirs too: two runs of one partition at once (a retry while
the old run still lives, the sensor and an operator) then never verify or
commit the same row twice, and a row's transition is applied only by the
holder of its lease.

A lease is given back when its holder is known to be dead: its process token
(pipeline/liveness.py) names a process on this host that no longer exists,
or the lease expired (a holder elsewhere stopped renewing). A restarted crawl
calls `release_dead_leases` before claiming, so it resumes at once instead of
waiting out the expiry of its dead predecessor's leases.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from media_crawler.pipeline.liveness import is_dead, token_of_owner
from media_crawler.store import leases as stored_leases
from media_crawler.store.leases import STAGE_LEASE_S, renew_leases
from media_crawler.store.ledger import Ledger


@dataclass
class LeaseRelease:
    requeued: int = 0  # downloading rows handed back to the download stage
    unleased: int = 0  # downloaded/verified rows whose stage lease was dropped
    dead_owners: list[str] = field(default_factory=list)


def dead_owners(ledger: Ledger, *, uncertain: bool = False, now: float | None = None) -> list[str]:
    """Lease owners whose process is gone or whose lease expired. uncertain=True
    treats every holder as gone (a restored backup: none of them runs here)."""
    now = time.time() if now is None else now
    latest = stored_leases.latest_expiry_by_owner(ledger)
    return [owner for owner, expires in latest.items()
            if uncertain or expires < now or is_dead(token_of_owner(owner)) is True]


def release_dead_leases(ledger: Ledger, *, uncertain: bool = False, now: float | None = None) -> LeaseRelease:
    """Give back rows leased by dead owners: downloading -> discovered (the .part
    stays, resumable with the validator the row recorded); other states keep
    their state and lose the lease."""
    release = LeaseRelease(dead_owners=dead_owners(ledger, uncertain=uncertain, now=now))
    released = stored_leases.release_leases_of(ledger, release.dead_owners)
    release.requeued, release.unleased = released.requeued, released.unleased
    return release


class LeaseHeartbeat:
    """Renews every lease `owner` holds while a stage runs; a dead process stops
    renewing, and its leases expire so another worker can take the rows."""

    def __init__(self, ledger: Ledger, owner: str, lease_s: float = STAGE_LEASE_S) -> None:
        self.ledger, self.owner, self.lease_s = ledger, owner, lease_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="mc-lease-heartbeat", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _beat(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            try:
                renew_leases(self.ledger, self.owner, self.lease_s)
            except Exception:  # a DB hiccup must not kill the stage; the next beat retries
                pass


class LeaseKeeper(LeaseHeartbeat):
    """A LeaseHeartbeat that, on the way out, normal or not, hands back the rows
    the stage did not move on, so a re-run can take them at once instead of
    waiting for the expiry."""

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        stored_leases.drop_leases_of(self.ledger, self.owner)

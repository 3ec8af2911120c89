"""Recovery: converge after a crash anywhere, and put store and ledger back in agreement.

- crash points (named places where a test can SIGKILL the process) live in `media_crawler/crashpoints.py`: the ledger uses them too, and store/ must not import recovery/.
- `liveness`: which process holds a lease or runs a Dagster run, and whether it is still alive.
- `leases`: stage leases for verify/commit, and handing back leases of dead workers.
- `outage`: a per-platform breaker, so a platform answering 500 does not burn every item's retries.
- `runs`: Dagster runs left STARTED by a killed process; failed and unfinished partitions.
- `reconcile`: the store against the ledger (`media-crawler reconcile`).
- `backup`, `restore`, `dispatch`: the backup/restore drill (docs/RECOVERY.md).
"""

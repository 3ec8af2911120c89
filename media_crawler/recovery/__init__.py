"""Recovery: after-the-fact tools that put store and ledger back in agreement.

Nothing on a crawl's normal path lives here (docs/DESIGN.md, "Layers"): crash points are
`crashpoints.py`, stage leases and the liveness of their holders `pipeline/leases.py` and
`pipeline/liveness.py` (their SQL `store/leases.py`), the outage breaker
`download/outage.py`, the staging sweep `store/staging.py`.

- `runs`: Dagster runs left STARTED by a killed process; failed and unfinished partitions.
- `rerequest`: when a failed partition is asked for again.
- `reconcile`: the store against the ledger (`media-crawler reconcile`).
- `backup`, `restore`, `dispatch`, `copying`: the backup/restore drill (docs/RECOVERY.md);
  `backup.publish_backup` is the publish order, `folder_backup` and `bucket` its destinations.
"""

"""Ledger rows as the checks of the blob store see them, and the repairs those checks make.

recovery/reconcile.py and store/staging.py compare the store's files with
the rows that name them, and pipeline/integrity.py a partition's committed rows
with their blobs; they judge, and these functions read and write the rows.
Every repair is conditional on the state the check observed, so a repair beside
a running crawl never undoes what the crawl did since.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterable

from sqlalchemy import delete, select, update

from media_crawler.store.ledger import COMMITTED, DISCOVERED, DOWNLOADING, MUX_VARIANT, Ledger, SourceScope, T, \
    where_sources

_CHUNK = 500  # ids per IN (...) list: far below SQLite's variable limit


@dataclass(frozen=True)
class BlobRow:
    id: int
    state: str
    sha256: str | None
    size: int | None
    etag: str | None
    lease_owner: str | None
    expected_sha256: str | None = None


_BLOB_COLUMNS = (T.c.id, T.c.state, T.c.sha256, T.c.size, T.c.etag, T.c.lease_owner, T.c.expected_sha256)


def rows_by_id(ledger: Ledger, task_ids: Iterable[int] | None = None) -> dict[int, BlobRow]:
    """id -> row, for every row of the ledger or (task_ids) those of them it holds."""
    with ledger.engine.connect() as conn:
        if task_ids is None:
            return {row.id: BlobRow(*row) for row in conn.execute(select(*_BLOB_COLUMNS))}
        ids, rows = list(task_ids), {}
        for start in range(0, len(ids), _CHUNK):
            query = select(*_BLOB_COLUMNS).where(T.c.id.in_(ids[start:start + _CHUNK]))
            rows.update((row.id, BlobRow(*row)) for row in conn.execute(query))
        return rows


def expected_hashes(ledger: Ledger) -> set[str]:
    """Every hash a feed announced: a blob with one of these names is not an orphan."""
    with ledger.engine.connect() as conn:
        return {row[0] for row in conn.execute(select(T.c.expected_sha256).where(T.c.expected_sha256.is_not(None)))}


def committed_blobs(ledger: Ledger, *, source_key: SourceScope,
                    day: str) -> list[tuple[str, str, float | None, int | None]]:
    """(canonical_url, sha256, committed_at, size) of the partition's committed rows."""
    query = where_sources(select(T.c.canonical_url, T.c.sha256, T.c.committed_at, T.c.size).where(
        T.c.day == day, T.c.state == COMMITTED), source_key)
    with ledger.engine.connect() as conn:
        return [(row.canonical_url, row.sha256, row.committed_at, row.size) for row in conn.execute(query)]


# `downloading` with no lease: no claim takes such a row (a claim takes expired leases, not absent ones).
_UNLEASED_DOWNLOAD = (T.c.state == DOWNLOADING) & T.c.lease_owner.is_(None)


def unleased_download_ids(ledger: Ledger) -> list[int]:
    with ledger.engine.connect() as conn:
        return [row[0] for row in conn.execute(select(T.c.id).where(_UNLEASED_DOWNLOAD))]


def requeue_unleased_downloads(ledger: Ledger, task_ids: list[int]) -> None:
    """downloading -> discovered for those of `task_ids` still downloading without a lease."""
    with ledger.engine.begin() as conn:
        conn.execute(update(T).where(_UNLEASED_DOWNLOAD, T.c.id.in_(task_ids)).values(
            state=DISCOVERED, updated_at=time.time()))


def commit_stranded(ledger: Ledger, task_id: int, *, observed_state: str) -> None:
    """-> committed, for a row still in `observed_state` whose blob the store holds
    (its .part is gone: the crash came after the blob's link)."""
    with ledger.engine.begin() as conn:
        conn.execute(update(T).where(T.c.id == task_id, T.c.state == observed_state).values(
            state=COMMITTED, committed_at=time.time(), lease_owner=None, lease_expires_at=None,
            error_class=None, error_code=None, error_message=None, updated_at=time.time()))


def requeue_for_download(ledger: Ledger, reason: str, *, state: str, task_id: int | None = None,
                         sha256: str | None = None) -> None:
    """Send the rows in `state` (the one observed) with this id or this blob back to
    discovered, with a fresh budget of attempts, to be downloaded again.

    A muxed MP4's row is deleted instead: it is made, not downloaded, and the next
    commit stage muxes the group's tracks again."""
    if task_id is None and sha256 is None:
        raise ValueError("requeue_for_download: name the row (task_id) or the blob (sha256)")
    condition = T.c.state == state
    if task_id is not None:
        condition &= T.c.id == task_id
    if sha256 is not None:
        condition &= T.c.sha256 == sha256
    with ledger.engine.begin() as conn:
        conn.execute(delete(T).where(condition, T.c.variant == MUX_VARIANT))
        conn.execute(update(T).where(condition, T.c.variant != MUX_VARIANT).values(
            state=DISCOVERED, sha256=None, size=None, committed_at=None, verified_at=None, attempts=0,
            next_attempt_at=None, lease_owner=None, lease_expires_at=None, error_class="storage_error",
            error_message=f"reconcile: {reason}; queued for download again", updated_at=time.time()))

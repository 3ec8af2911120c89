"""The store against the ledger: where they disagree, and how to bring them back together.

What is checked (`kind` of each finding, and what `repair=True` does about it):

| kind              | what                                                  | repair                          |
|-------------------|-------------------------------------------------------|---------------------------------|
| dead_lease        | rows leased by a dead process or an expired lease     | release; downloading -> discovered |
| unleased_download | `downloading` rows nobody holds (no claim takes them) | -> discovered                   |
| corrupt_blob      | blob whose size (or, with verify_hashes, sha256)      | move to quarantine/, its rows   |
|                   | disagrees with its name                               | -> discovered                   |
| missing_blob      | committed row whose blob is absent                    | -> discovered (downloaded again)|
| stranded_row      | downloaded/verified row whose .part is gone           | -> committed if the blob is     |
|                   |                                                       | stored, else -> discovered      |
| linked_part       | .part that is a second name of a stored blob (a crash | removed: the blob keeps the     |
|                   | between the store's link and the unlink)              | bytes (any age, any lease)      |
| stale_part        | .part no row can use (no row, row finished, or no     | removed                         |
|                   | validator to resume it with)                          |                                 |
| resumable_part    | .part of an unfinished row with a resume validator    | kept (information)              |
| orphan_blob       | blob no row names                                     | kept (information)              |
| stale_upload      | an object store's multipart upload never completed    | aborted (older than part_grace) |
|                   | (a worker killed mid-put): invisible, but it costs    |                                 |
| orphan_answer     | a blob of the answer store no answer row names (a     | removed (store/answer_release.py|
|                   | compact or a crawl killed between its two steps)      | `sweep_unnamed`)                |
| pending_answer_   | an answer blob a killed compact marked for release    | released (`sweep_unnamed`); no  |
| release           | (deleted or not): its bytes are kept by no crawl      | answer with those bytes is kept |
|                   | until the mark is finished                            | until then                      |

A muxed MP4's row (variant `mux`) is deleted instead of re-queued: it was never
downloaded, and the next commit stage muxes the group's tracks again.

Nothing is deleted that cannot be obtained again: media blobs are never removed
(corrupt ones are quarantined, orphans kept; an answer blob no row names is removed,
since nothing can name it again: the archive reaches an answer through its row), and a row only goes back to
`discovered`, from where the pipeline downloads it again. Repairs are
conditional updates (the row must still be in the state that was observed),
and .part files younger than `part_grace_s` are left alone, so a reconcile
beside a running crawl cannot undo the crawl's work (a linked_part is the
exception: removing a second name of stored bytes loses nothing at any moment).

Each finding's `action` says what repair did ("removed", "-> committed") or,
in a check without repair, what it would do ("would remove", "would commit").
"""
from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import asdict, dataclass, field

from media_crawler.pipeline.leases import dead_owners, release_dead_leases
from media_crawler.store import blob_rows
from media_crawler.store.answer_release import pending_releases, sweep_unnamed, unnamed_answer_blobs
from media_crawler.store.blob_rows import BlobRow
from media_crawler.store.blob_store import BlobStore, UnfinishedUploads, rehash
from media_crawler.store.ledger import COMMITTED, DOWNLOADED, FINISHED_STATES, VERIFIED, Ledger

INFO_KINDS = frozenset({"resumable_part", "orphan_blob"})
_PART_NAME = re.compile(r"^task-(\d+)\.part$")


@dataclass(frozen=True)
class Finding:
    kind: str
    subject: str  # a path, a task id or a lease owner
    detail: str
    action: str  # what repair did ("removed"), or in a check what it would do ("would remove")


@dataclass
class ReconcileReport:
    findings: list[Finding] = field(default_factory=list)
    repaired: bool = False
    blobs_checked: int = 0
    hashes_verified: bool = False
    rows_checked: int = 0
    parts_checked: int = 0

    @property
    def problems(self) -> list[Finding]:
        return [finding for finding in self.findings if finding.kind not in INFO_KINDS]

    def counts(self) -> Counter:
        return Counter(finding.kind for finding in self.findings)

    def as_json(self) -> dict:
        return {"repaired": self.repaired, "dry_run": not self.repaired, "blobs_checked": self.blobs_checked,
                "rows_checked": self.rows_checked,
                "parts_checked": self.parts_checked, "hashes_verified": self.hashes_verified,
                "counts": dict(self.counts()), "problems": len(self.problems),
                "findings": [asdict(finding) for finding in self.findings]}


_REQUEUE = ("-> discovered", "would re-queue (-> discovered)")


class Reconciler:
    def __init__(self, ledger: Ledger, store: BlobStore, *, repair: bool = False, verify_hashes: bool = False,
                 uncertain_leases: bool = False, part_grace_s: float = 300.0,
                 answers: BlobStore | None = None) -> None:
        self.ledger, self.store, self.repair, self.answers = ledger, store, repair, answers
        self.verify_hashes, self.uncertain_leases, self.part_grace_s = verify_hashes, uncertain_leases, part_grace_s
        self.report = ReconcileReport(repaired=repair, hashes_verified=verify_hashes)

    def run(self) -> ReconcileReport:
        dead = set(self._leases())
        self._unleased_downloads()
        rows = self._rows()
        blobs, corrupt = self._blobs(rows)
        self._missing_blobs(rows, blobs)
        self._stranded_rows(rows, blobs - corrupt, dead)
        self._parts(rows, dead)
        self._uploads()
        referenced = {row.sha256 for row in rows.values() if row.sha256} | self._expected_hashes()
        for name in sorted(blobs - referenced):
            self._note("orphan_blob", name, "no ledger row names this blob", "kept", "kept")
        self._answers()
        return self.report

    def _answers(self) -> None:
        """Answer blobs no answer row names (answers: the answer store, when given)."""
        if self.answers is None:
            return
        for name in unnamed_answer_blobs(self.ledger, self.answers):
            self._note("orphan_answer", self.answers.location(name), "no kept answer names this blob", "removed",
                       "would remove")
        for name in pending_releases(self.ledger):
            self._note("pending_answer_release", self.answers.location(name),
                       "a compact was killed releasing this blob; no crawl keeps these bytes meanwhile", "released",
                       "would release")
        if self.repair:
            sweep_unnamed(self.ledger, self.answers)  # checked again, under the lock a keeper takes

    # -- leases -------------------------------------------------------------------
    def _leases(self) -> list[str]:
        owners = dead_owners(self.ledger, uncertain=self.uncertain_leases)
        for owner in owners:
            self._note("dead_lease", owner, "holder is gone, or the lease expired", "released; downloads re-queued",
                       "would release; downloads would be re-queued")
        if self.repair and owners:
            release_dead_leases(self.ledger, uncertain=self.uncertain_leases)
        return owners

    def _unleased_downloads(self) -> None:
        ids = blob_rows.unleased_download_ids(self.ledger)
        for task_id in ids:
            self._note("unleased_download", f"t_{task_id}", "downloading, but nobody holds it", *_REQUEUE)
        if self.repair and ids:
            blob_rows.requeue_unleased_downloads(self.ledger, ids)

    # -- rows and blobs -----------------------------------------------------------
    def _rows(self) -> dict[int, BlobRow]:
        rows = blob_rows.rows_by_id(self.ledger)
        self.report.rows_checked = len(rows)
        return rows

    def _expected_hashes(self) -> set[str]:
        return blob_rows.expected_hashes(self.ledger)

    def _blobs(self, rows: dict[int, BlobRow]) -> tuple[set[str], set[str]]:
        """(names of stored blobs, names of corrupt ones)."""
        sizes = {row.sha256: row.size for row in rows.values() if row.state == COMMITTED and row.sha256 and row.size}
        names, corrupt = set(), set()
        for name in self.store.iter_sha256s():
            names.add(name)
            self.report.blobs_checked += 1
            expected_size = sizes.get(name)
            if expected_size is not None and (size := self.store.size(name)) != expected_size:
                corrupt.add(name)
                self._corrupt(name, f"{size} bytes, the ledger recorded {expected_size}")
            elif self.verify_hashes and rehash(self.store, name) != name:
                corrupt.add(name)
                self._corrupt(name, "its bytes no longer hash to its name")
        return names, corrupt

    def _corrupt(self, sha256: str, detail: str) -> None:
        self._note("corrupt_blob", self.store.location(sha256), detail, "quarantined; its rows re-queued",
                   "would quarantine; its rows would be re-queued")
        if not self.repair:
            return
        self.store.quarantine(sha256)  # kept for a person to look at, out of the store's names
        self._requeue("blob failed its check", state=COMMITTED, sha256=sha256)

    def _missing_blobs(self, rows: dict[int, BlobRow], blobs: set[str]) -> None:
        for row in rows.values():
            if row.state == COMMITTED and row.sha256 not in blobs:
                self._note("missing_blob", f"t_{row.id}", f"committed as {row.sha256}, not in the store",
                           *_REQUEUE)
                if self.repair:
                    self._requeue("blob missing from the store", state=COMMITTED, task_id=row.id)

    def _stranded_rows(self, rows: dict[int, BlobRow], good_blobs: set[str], dead: set[str]) -> None:
        for row in rows.values():
            if row.state not in (DOWNLOADED, VERIFIED) or (row.lease_owner and row.lease_owner not in dead):
                continue
            if self.store.staging_path(f"task-{row.id}").exists():
                continue
            if row.sha256 in good_blobs:
                self._note("stranded_row", f"t_{row.id}", f"{row.state}, .part gone, blob stored", "-> committed",
                           "would commit (-> committed)")
                if self.repair:
                    blob_rows.commit_stranded(self.ledger, row.id, observed_state=row.state)
            else:
                self._note("stranded_row", f"t_{row.id}", f"{row.state}, .part gone, blob absent", *_REQUEUE)
                if self.repair:
                    self._requeue("staged file missing", state=row.state, task_id=row.id)

    # -- staging ------------------------------------------------------------------
    def _parts(self, rows: dict[int, BlobRow], dead: set[str]) -> None:
        cutoff = time.time() - self.part_grace_s
        for path in self.store.iter_parts():
            self.report.parts_checked += 1
            match = _PART_NAME.match(path.name)
            row = rows.get(int(match.group(1))) if match else None
            blob = self.store.stored_name_of(path, (row.sha256, row.expected_sha256) if row else ())
            if blob is not None:
                # Removing a second name of stored bytes loses nothing, whoever holds the row.
                self._note("linked_part", str(path), f"a second name of the stored blob {blob} (a crash "
                           "between the store's link and the unlink)", "removed", "would remove")
                if self.repair:
                    path.unlink(missing_ok=True)
                continue
            if row is not None and row.lease_owner and row.lease_owner not in dead:
                continue  # a live worker is writing it
            if row is not None and row.state in (DOWNLOADED, VERIFIED):
                continue  # the bytes the next stage verifies or commits
            if row is not None and row.state not in FINISHED_STATES and row.etag:
                self._note("resumable_part", str(path), f"row t_{row.id} is {row.state}; resumable", "kept", "kept")
                continue
            why = ("no ledger row" if row is None else f"row t_{row.id} is {row.state}" if row.state in FINISHED_STATES
                   else f"row t_{row.id} has no validator to resume with")
            if path.stat().st_mtime > cutoff:
                continue  # too fresh to judge: a worker may have claimed the row since we read it
            if self.repair and match and self._leased_now(int(match.group(1))):
                continue  # its row was claimed since we read it: the claimer's file now
            self._note("stale_part", str(path), why, "removed", "would remove")
            if self.repair:
                path.unlink(missing_ok=True)

    def _uploads(self) -> None:
        """Unfinished multipart uploads older than the grace (a younger one may be a live
        worker's put): no ledger row can finish one, the put starts again from its staged file."""
        if not isinstance(self.store, UnfinishedUploads):
            return
        for where, upload_id in self.store.unfinished_uploads(older_than_s=self.part_grace_s):
            self._note("stale_upload", where, f"multipart upload {upload_id[:16]}... never completed",
                       "aborted", "would abort")
            if self.repair:
                self.store.abort_upload(where, upload_id)

    def _leased_now(self, task_id: int) -> bool:
        row = blob_rows.rows_by_id(self.ledger, [task_id]).get(task_id)
        return bool(row and row.lease_owner) or bool(row and row.state in (DOWNLOADED, VERIFIED))

    # -- helpers ------------------------------------------------------------------
    def _requeue(self, reason: str, *, state: str, task_id: int | None = None, sha256: str | None = None) -> None:
        # A muxed MP4's row is deleted instead (module docstring).
        blob_rows.requeue_for_download(self.ledger, reason, state=state, task_id=task_id, sha256=sha256)

    def _note(self, kind: str, subject: str, detail: str, done: str, planned: str) -> None:
        """Record a finding: `done` is what repair did, `planned` what a check without repair would do."""
        self.report.findings.append(Finding(kind, subject, detail, done if self.repair else planned))


def reconcile(ledger: Ledger, store: BlobStore, **options) -> ReconcileReport:
    """Check (and with repair=True, fix) the store against the ledger; see the module docstring."""
    return Reconciler(ledger, store, **options).run()

"""The ledger's batched writes, on SQLite and (when it runs) PostgreSQL: insert-if-absent,
record_discovered over large batches, and apply() as executemany with lease guards."""
from __future__ import annotations

import time

import pytest
from sqlalchemy import select

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.models import Lease, MediaRecord
from media_crawler.store import schema
from media_crawler.store.ledger import COMMITTED, DISCOVERED, DOWNLOADED, FAILED, GONE, Ledger
from media_crawler.store.leases import claim_downloads
from media_crawler.store.transitions import Downloaded, FailedAttempt
from media_crawler_tests.ledger_columns import columns


def record(n: int, url: str | None = None) -> MediaRecord:
    return MediaRecord(platform="urls", item_id=f"id{n}", variant="file", kind="image",
                       canonical_url=f"https://example.org/{n}", media_url=url or f"https://cdn.example.org/{n}.jpg")


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger(request, tmp_path):
    if request.param == "sqlite":
        return Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    return Ledger(request.getfixturevalue("postgres").create())


def test_insert_if_absent_inserts_only_new_identities_and_leaves_existing_rows_alone(ledger):
    assert [r.item_id for r in ledger.insert_if_absent([record(1), record(2)], source_key="s", day="d")] == ["id1", "id2"]
    [first, _] = ledger.tasks()
    ledger.apply([(first.id, None, columns(state=COMMITTED))])

    again = ledger.insert_if_absent([record(1, url="https://cdn.example.org/new.jpg"), record(2), record(3)],
                                    source_key="s", day="d2", run_id="r2")
    assert [r.item_id for r in again] == ["id3"]
    rows = {task.item_id: task for task in ledger.tasks()}
    assert rows["id1"].state == COMMITTED and rows["id1"].media_url == "https://cdn.example.org/1.jpg"
    assert rows["id3"].state == DISCOVERED and rows["id3"].day == "d2" and rows["id3"].attempts == 0
    assert ledger.insert_if_absent([record(1), record(3)], source_key="s", day="d") == []
    assert ledger.insert_if_absent([], source_key="s", day="d") == []


def test_record_discovered_counts_a_large_mixed_batch_like_one_row_at_a_time(ledger):
    first = ledger.record_discovered([record(n) for n in range(1200)], source_key="s", day="d")
    assert (first.new, first.skipped_seen, first.in_progress, first.requeued) == (1200, 0, 0, 0)
    tasks = ledger.tasks()
    assert len(tasks) == 1200 and {t.state for t in tasks} == {DISCOVERED}
    by_item = {t.item_id: t for t in tasks}
    boom = CrawlError(ErrorClass.HTTP_5XX, "boom")
    ledger.apply([(by_item["id0"].id, None, columns(state=COMMITTED)), (by_item["id1"].id, None, columns(state=GONE)),
                  (by_item["id2"].id, None, FailedAttempt(boom, 5, None))])

    batch = [record(n) for n in range(1300)] + [record(5, url="https://cdn.example.org/moved.jpg"), record(1250)]
    again = ledger.record_discovered(batch, source_key="s", day="d")
    # 0 and 1 are seen; 2 failed and is requeued; 3..1199 are in progress (5 twice);
    # 1200..1299 are new, and 1250 listed twice is one row.
    assert (again.new, again.skipped_seen, again.requeued, again.in_progress) == (100, 2, 1, 1197 + 1 + 1)
    by_item = {t.item_id: t for t in ledger.tasks()}
    assert len(by_item) == 1300
    assert by_item["id2"].state == DISCOVERED and by_item["id2"].attempts == 0
    assert by_item["id5"].media_url == "https://cdn.example.org/moved.jpg"
    assert by_item["id0"].state == COMMITTED and by_item["id1"].state == GONE


def test_record_discovered_gives_every_listed_row_as_a_read_after_its_batch_would(ledger):
    """discover's fetch lines take the rows from the summary instead of reading them again."""
    from media_crawler.store.reports.reads import rows_by_identity

    def as_read(summary):
        return {(item_id, variant): row for (_platform, item_id, variant), row in summary.rows.items()}

    ids = [f"id{n}" for n in range(5)]
    first = ledger.record_discovered([record(n) for n in range(3)], source_key="s", day="d")
    assert as_read(first) == rows_by_identity(ledger, "urls", ids)
    by_item = {t.item_id: t for t in ledger.tasks()}
    ledger.apply([(by_item["id0"].id, None, columns(state=COMMITTED)),
                  (by_item["id1"].id, None, FailedAttempt(CrawlError(ErrorClass.HTTP_5XX, "boom"), 5, None))])
    # Seen, requeued, in progress, new, and new listed twice in the batch.
    again = ledger.record_discovered([record(0), record(1), record(2), record(3), record(4), record(4)],
                                     source_key="s", day="d")
    assert as_read(again) == rows_by_identity(ledger, "urls", ids)
    assert [as_read(again)[(f"id{n}", "file")].state for n in range(5)] == [COMMITTED] + [DISCOVERED] * 4
    assert as_read(again)[("id1", "file")].attempts == 0


def test_apply_writes_many_shapes_in_order_and_respects_lease_owners(ledger):
    ledger.record_discovered([record(n) for n in range(10)], source_key="s", day="d")
    mine = claim_downloads(ledger, source_key="s", day="d", lease=Lease("a", 60), limit=6)
    theirs = claim_downloads(ledger, source_key="s", day="d", lease=Lease("b", 60))
    now = time.time()
    changes = [(task.id, "a", Downloaded("ab" * 32, 10, None, now, attempts=1)) for task in mine[:4]]
    changes += [(task.id, "a", Downloaded("cd" * 32, 20, '"e"', now, attempts=1)) for task in theirs]  # not ours: skipped
    changes += [(mine[4].id, "a", FailedAttempt(CrawlError(ErrorClass.NOT_FOUND, "404"), 1, None))]
    changes += [(mine[5].id, None, columns(state=FAILED)), (mine[5].id, None, columns(state=COMMITTED, size=7))]
    assert ledger.apply(changes) == 4 + 1 + 2
    states = {task.id: task for task in ledger.tasks()}
    assert all(states[t.id].state == DOWNLOADED and states[t.id].sha256 == "ab" * 32 for t in mine[:4])
    assert all(states[t.id].state == "downloading" and states[t.id].sha256 is None for t in theirs)
    assert states[mine[4].id].state == GONE
    assert states[mine[5].id].state == COMMITTED and states[mine[5].id].size == 7  # the later change wins
    with ledger.engine.connect() as conn:
        stamps = conn.execute(select(schema.tasks.c.updated_at).where(schema.tasks.c.id == mine[0].id)).scalar()
    assert stamps >= now
    assert ledger.apply([]) == 0


def test_a_new_row_without_a_required_column_is_refused_and_its_batch_written_by_none(ledger):
    """SQLite inserts with OR IGNORE (no statement journal: ledger.SQLITE_NO_ABORT); a row
    missing a NOT NULL column must still fail the batch there, as PostgreSQL's NOT NULL does."""
    without_url = MediaRecord(platform="urls", item_id="bad", variant="file", kind="image",
                              canonical_url="https://example.org/bad", media_url=None)
    with pytest.raises(ledger.engine.dialect.dbapi.IntegrityError, match="media_url"):
        ledger.record_discovered([record(1), without_url], source_key="s", day="d")
    assert ledger.tasks() == []

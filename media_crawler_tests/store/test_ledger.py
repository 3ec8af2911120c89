"""The ledger: seen-set, leases and claims, batched transitions, cursors, migrations."""
import dataclasses
import time

import pytest

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.models import Lease, MediaRecord
from media_crawler.store.ledger import COMMITTED, DISCOVERED, DOWNLOADING, GONE, RETRY_WAIT, Ledger
from media_crawler.store.leases import claim_downloads
from media_crawler.store.transitions import Downloaded, FailedAttempt
from media_crawler_tests.ledger_columns import columns


def record(n: int, platform="urls") -> MediaRecord:
    return MediaRecord(platform=platform, item_id=f"id{n}", variant="file", kind="image",
                       canonical_url=f"https://example.org/{n}", media_url=f"https://cdn.example.org/{n}.jpg")


@pytest.fixture
def ledger(tmp_path):
    return Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")


def test_seen_set_skips_committed_and_gone_items(ledger):
    first = ledger.record_discovered([record(1), record(2), record(3)], source_key="s", day="2026-11-25")
    assert first.new == 3
    tasks = ledger.tasks(source_key="s", day="2026-11-25")
    ledger.apply([(tasks[0].id, None, columns(state=COMMITTED)), (tasks[1].id, None, columns(state=GONE))])
    again = ledger.record_discovered([record(1), record(2), record(3), record(4)], source_key="s", day="2026-11-25")
    assert (again.new, again.skipped_seen, again.in_progress) == (1, 2, 1)


def test_a_failed_item_is_requeued_by_a_new_discovery(ledger):
    ledger.record_discovered([record(1)], source_key="s", day="d")
    task = ledger.tasks()[0]
    ledger.apply([(task.id, None, FailedAttempt(CrawlError(ErrorClass.HTTP_5XX, "boom"), 5, None))])
    assert ledger.tasks()[0].state == "failed"
    summary = ledger.record_discovered([record(1)], source_key="s", day="d")
    assert summary.requeued == 1 and ledger.tasks()[0].state == DISCOVERED and ledger.tasks()[0].attempts == 0


def test_claims_lease_rows_to_one_owner(ledger):
    ledger.record_discovered([record(n) for n in range(5)], source_key="s", day="d")
    a = claim_downloads(ledger, source_key="s", day="d", lease=Lease("a", 60))
    b = claim_downloads(ledger, source_key="s", day="d", lease=Lease("b", 60))
    assert len(a) == 5 and b == []
    assert {t.state for t in ledger.tasks()} == {DOWNLOADING}


def test_expired_leases_are_reclaimed_and_the_old_owner_cannot_write(ledger):
    ledger.record_discovered([record(1)], source_key="s", day="d")
    [task] = claim_downloads(ledger, source_key="s", day="d", lease=Lease("dead", -1))
    [again] = claim_downloads(ledger, source_key="s", day="d", lease=Lease("alive", 60))
    assert again.id == task.id
    assert ledger.apply([(task.id, "dead", columns(state=COMMITTED))]) == 0
    assert ledger.apply([(task.id, "alive", Downloaded("ab" * 32, 10, None, time.time(), attempts=1))]) == 1


def test_retry_wait_respects_next_attempt_time(ledger):
    ledger.record_discovered([record(1)], source_key="s", day="d")
    [task] = claim_downloads(ledger, source_key="s", day="d", lease=Lease("a", 60))
    error = CrawlError(ErrorClass.RATE_LIMITED, "429", retry_after=30)
    ledger.apply([(task.id, "a", FailedAttempt(error, 1, time.time() + 30))])
    assert ledger.tasks()[0].state == RETRY_WAIT
    assert claim_downloads(ledger, source_key="s", day="d", lease=Lease("b", 60)) == []
    assert len(claim_downloads(ledger, source_key="s", day="d", lease=Lease("b", 60), ignore_backoff=True)) == 1


def test_permanent_errors_end_gone(ledger):
    ledger.record_discovered([record(1)], source_key="s", day="d")
    task = ledger.tasks()[0]
    ledger.apply([(task.id, None, FailedAttempt(CrawlError(ErrorClass.NOT_FOUND, "404"), 1, time.time()))])
    assert ledger.tasks()[0].state == GONE


def test_cursors_round_trip(ledger):
    assert ledger.get_cursor("s", "newest") is None
    ledger.set_cursor("s", "newest", "a")
    ledger.set_cursor("s", "newest", "b")
    assert ledger.get_cursor("s", "newest") == "b"


def test_opening_twice_does_not_migrate_twice(tmp_path):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    Ledger(url).record_discovered([record(1)], source_key="s", day="d")
    from media_crawler.store.database import dispose_engines

    dispose_engines()
    assert len(Ledger(url).tasks()) == 1


def test_sqlite_checkpoints_its_wal_every_4000_pages_not_every_1000(tmp_path):
    """store/database.py WAL_CHECKPOINT_PAGES: a ledger page rewritten by many batches is
    copied into the database once per checkpoint; a commit below the mark copies nothing."""
    import os

    path = tmp_path / "ledger.db"
    ledger = Ledger(f"sqlite:///{path}")
    with ledger.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 4000
    size_before = os.path.getsize(path)
    ledger.record_discovered([record(n) for n in range(14_000)], source_key="s", day="d")  # >1,000 pages
    wal_pages = os.path.getsize(f"{path}-wal") // (4096 + 24)
    assert 1000 < wal_pages < 4000 and os.path.getsize(path) == size_before  # not checkpointed yet


def test_a_registered_secret_in_any_feed_text_is_masked_in_that_column_only(tmp_path, monkeypatch):
    # _record_columns looks at the feed's texts in one pass and masks column by column only
    # when that pass finds a secret: each column must hold what masking it alone gives.
    from media_crawler import scrub
    from media_crawler.store.ledger import _record_columns

    monkeypatch.setattr(scrub, "_REGISTERED", ("s3cr3tvalue",))
    plain = MediaRecord(platform="urls", item_id="id-1", variant="file", kind="image",
                        canonical_url="https://example.org/1", media_url="https://cdn.example.org/1.jpg",
                        backup_urls=("https://b.example.org/1.jpg",), group="g1", resolve_ref="post:1",
                        meta={"title": "a title"})
    assert _record_columns(plain)["meta"] == '{"title": "a title"}'
    for field_name, column, value in [("item_id", "item_id", "id-s3cr3tvalue"), ("variant", "variant", "vs3cr3tvalue"),
                                      ("media_url", "media_url", "https://cdn/?k=s3cr3tvalue"),
                                      ("backup_urls", "backup_urls", ("https://b/s3cr3tvalue",)),
                                      ("group", "group_key", "s3cr3tvalue"), ("resolve_ref", "resolve_ref", "post:s3cr3tvalue"),
                                      ("meta", "meta", {"title": "s3cr3tvalue!"})]:
        columns = _record_columns(dataclasses.replace(plain, **{field_name: value}))
        assert "s3cr3tvalue" not in repr(columns), field_name
        assert "***" in columns[column], field_name
        assert columns == {**_record_columns(plain), column: columns[column]}, field_name
    # Two texts that make a registered form only where the join puts them side by side.
    monkeypatch.setattr(scrub, "_REGISTERED", ("id-1\nfile",))
    assert _record_columns(plain)["item_id"] == "id-1" and _record_columns(plain)["variant"] == "file"

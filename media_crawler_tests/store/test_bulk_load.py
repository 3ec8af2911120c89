"""A synthesized ledger goes in through the store (store/bulk_load.py: COPY on PostgreSQL,
executemany on SQLite), and a saved histogram fold can be dropped (delay_fold.drop_saved_fold):
what `python -m bench synth_ledger` and `ledger_queries` do, on both databases."""
from __future__ import annotations

import pytest
from sqlalchemy import func, select

from media_crawler.store import bulk_load, schema
from media_crawler.store.ledger import Ledger
from media_crawler.store.reports import counts, delay_fold

NOW = 1_800_000_000.0


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger(request, tmp_path):
    if request.param == "sqlite":
        return Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    return Ledger(request.getfixturevalue("postgres").create())


def task(n: int, state: str, **values) -> dict:
    row = dict.fromkeys(bulk_load.TASK_COLUMNS)
    row.update(platform="urls", item_id=f"i{n}", variant="orig", kind="image", source_key="urls-abc", day="2026-12-01",
               canonical_url=f"https://media.example.org/{n}.jpg", media_url=f"https://media.example.org/{n}.jpg",
               backup_urls="[]", meta='{"title": "a, \\"quoted\\"\\ttab"}', state=state, attempts=1, run_id="r1",
               discovered_at=NOW - 100, queued_at=NOW - 99, updated_at=NOW - 99, **values)
    return row


def test_rows_loaded_in_batches_read_back_as_the_stages_would_have_left_them(ledger):
    rows = [task(n, "committed", committed_at=NOW - 50, sha256=f"{n:064x}", size=10) for n in range(5)]
    rows += [task(5, "discovered"), task(6, "failed", error_class="http_5xx", error_message="HTTP 500, twice")]
    written, seen = bulk_load.load_tasks(ledger, iter(rows), batch=2, progress=[].append), []
    bulk_load.load_tasks(ledger, [], progress=seen.append)
    bulk_load.load_feed_errors(ledger, [{"source_key": "urls-abc", "day": "2026-12-01", "platform": "urls",
                                         "error_class": "parse_error", "message": "bad page", "run_id": "r1",
                                         "at": NOW - 10}])
    bulk_load.load_rate_budgets(ledger, [{"platform": "urls", "tokens": 4.0, "updated_at": NOW, "rate": 5.0,
                                          "base_rate": 5.0, "burst": 10.0, "slow_until": 0.0, "in_flight": 0}])
    bulk_load.analyze(ledger)
    assert written == 7 and seen == []
    assert ledger.state_counts() == {"committed": 5, "discovered": 1, "failed": 1}
    assert counts.unresolved_feed_errors(ledger.engine) == {("urls", "parse_error"): 1}
    with ledger.engine.connect() as conn:
        [(meta,)] = conn.exec_driver_sql("select meta from mc_tasks where item_id = 'i0'").fetchall()
    assert meta == '{"title": "a, \\"quoted\\"\\ttab"}'  # COPY's CSV quoting keeps commas, quotes and tabs


def test_a_dropped_fold_is_folded_again_from_the_rows(ledger):
    bulk_load.load_tasks(ledger, [task(n, "committed", committed_at=NOW - 7200 + n, claimed_at=NOW - 7300,
                                       started_at=NOW - 7250, finished_at=NOW - 7240, verified_at=NOW - 7230)
                                  for n in range(3)])
    first = delay_fold.CommittedDelays(ledger.engine).current(NOW)
    assert saved_folds(ledger) == 1
    delay_fold.drop_saved_fold(ledger.engine)
    assert saved_folds(ledger) == 0
    assert delay_fold.CommittedDelays(ledger.engine).current(NOW) == first  # folded again from the rows


def saved_folds(ledger: Ledger) -> int:
    C = schema.cursors
    with ledger.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(C).where(
            C.c.source_key == delay_fold.FOLD_SOURCE_KEY, C.c.name == delay_fold.FOLD_NAME)).scalar_one()

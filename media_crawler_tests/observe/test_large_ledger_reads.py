"""The reads issue 16 made bounded (bench/LEDGER_1M.md): failures' samples for many groups at
once and its group limit, the delay histograms' fold kept in the ledger, stage delays by index."""
from sqlalchemy import delete, insert, select

from media_crawler.store.reports import delay_fold, delays
from media_crawler.store.reports.failures import SAMPLE_RUNS, SAMPLE_URLS, failure_report
from media_crawler.store import schema

NOW = 1_800_000_000.0
T = schema.tasks


def add(conn, n, **values):
    row = {"platform": "urls", "item_id": f"i{n}", "variant": "file", "kind": "image", "source_key": "urls-x",
           "day": "2026-11-27", "canonical_url": f"http://example.org/{n}.jpg", "media_url": "http://example.org/m",
           "state": "committed", "attempts": 1, "updated_at": NOW - 100}
    row.update(values)
    conn.execute(insert(T).values(**row))


def test_every_group_gets_its_own_latest_samples_and_runs_and_the_limit_counts_the_rest(empty_ledger):
    classes = ["http_5xx", "network_timeout", "not_found", "auth"]
    with empty_ledger.engine.begin() as conn:
        n = 0
        for rank, error_class in enumerate(classes):
            state = "gone" if error_class == "not_found" else "failed"
            for k in range(8):
                n += 1
                add(conn, n, state=state, error_class=error_class, error_message=f"{error_class} {k}",
                    failed_at=NOW - 1000 * rank - k, run_id=f"run-{error_class}-{k}")
    report = failure_report(empty_ledger.engine, now=NOW)
    assert [g.error_class for g in report.gave_up] == classes  # most recent first
    for group in report.gave_up:
        assert group.count == 8 and len(group.canonical_urls) == SAMPLE_URLS
        assert group.sample_message == f"{group.error_class} 0"
        assert group.run_ids == sorted(f"run-{group.error_class}-{k}" for k in range(SAMPLE_RUNS))
    limited = failure_report(empty_ledger.engine, now=NOW, limit=2).as_json()
    assert [g["error_class"] for g in limited["gave_up"]] == classes[:2]
    assert limited["omitted_groups"] == {"gave_up": 2, "retrying": 0}
    assert limited["totals"] == {"gave_up": 32, "retrying": 0}


def test_the_histograms_fold_is_kept_in_the_ledger_and_read_by_the_next_exporter(empty_ledger):
    engine = empty_ledger.engine
    with engine.begin() as conn:
        for n in range(5):
            at = NOW - 7200 + n
            add(conn, n, queued_at=at - 10, claimed_at=at - 8, started_at=at - 7, finished_at=at - 5,
                verified_at=at - 2, committed_at=at)
    first = delay_fold.CommittedDelays(engine).current(NOW)
    with engine.connect() as conn:
        saved = conn.execute(select(schema.cursors.c.updated_at).where(
            schema.cursors.c.source_key == delay_fold.FOLD_SOURCE_KEY)).scalar_one()
    assert saved == NOW - delays.COMMIT_SETTLE_S
    # A new exporter reads the fold, not the rows: a folded row taken out of the ledger stays counted
    # (counters do not go down), and a row committed since is added.
    with engine.begin() as conn:
        conn.execute(delete(T).where(T.c.item_id == "i0"))
        add(conn, 9, queued_at=NOW - 20, claimed_at=NOW - 18, started_at=NOW - 17, finished_at=NOW - 15,
            verified_at=NOW - 12, committed_at=NOW - 10)
    second = delay_fold.CommittedDelays(engine).current(NOW)
    assert second["stage"][("urls", "queue")]["count"] == first["stage"][("urls", "queue")]["count"] + 1 == 6
    fresh = delay_fold.CommittedDelays(engine, persist=False).current(NOW)
    assert fresh["stage"][("urls", "queue")]["count"] == 5
    # A fold of other buckets is not used.
    other = delay_fold.CommittedDelays(engine, buckets=(1.0, 10.0)).current(NOW)
    assert other["stage"][("urls", "queue")]["count"] == 5


def test_a_ledger_never_folded_is_folded_a_chunk_per_scrape_and_the_counts_only_grow(empty_ledger):
    engine = empty_ledger.engine
    with engine.begin() as conn:
        for n in range(10):
            at = NOW - 7200 + (n // 2)  # two commits per second: a chunk's edge never splits a tie
            add(conn, n, queued_at=at - 10, claimed_at=at - 8, started_at=at - 7, finished_at=at - 5,
                verified_at=at - 2, committed_at=at)
    whole = delay_fold.CommittedDelays(engine, persist=False).current(NOW)["stage"][("urls", "queue")]["count"]
    seen, complete = [], []
    for scrape in range(6):
        # A new exporter every time: each scrape goes on from the fold the last one saved.
        exporter = delay_fold.CommittedDelays(engine, chunk_rows=3)
        seen.append(exporter.current(NOW)["stage"].get(("urls", "queue"), {"count": 0})["count"])
        complete.append(exporter.caught_up)
    assert seen == sorted(seen) and seen[0] < whole, "grows a chunk at a time"
    assert 3 <= seen[0] <= 4, "a chunk reads about chunk_rows rows (ties at its edge included)"
    assert seen[-1] == whole == 10 and complete[-1] and not complete[0]
    assert complete.index(True) <= 4 and seen[complete.index(True):] == [whole] * (6 - complete.index(True))


def test_stage_delays_count_recent_commits_and_unfinished_rows_only(empty_ledger):
    with empty_ledger.engine.begin() as conn:
        add(conn, 1, queued_at=NOW - 60, claimed_at=NOW - 50, started_at=NOW - 49, finished_at=NOW - 40,
            verified_at=NOW - 39, committed_at=NOW - 38)
        add(conn, 2, queued_at=NOW - 9e5, claimed_at=NOW - 9e5 + 5, started_at=NOW - 9e5 + 6,
            finished_at=NOW - 9e5 + 7, verified_at=NOW - 9e5 + 8, committed_at=NOW - 9e5 + 9)  # older than the window
        add(conn, 3, state="downloading", queued_at=NOW - 30, claimed_at=NOW - 20, started_at=NOW - 19)
    found = delays.stage_delays(empty_ledger.engine, NOW)
    assert found["queue"]["count"] == 2 and found["queue"]["max"] == 10.0
    assert found["execution"]["count"] == 1 and found["execution"]["p50"] == 9.0
    assert found["commit"]["count"] == 1

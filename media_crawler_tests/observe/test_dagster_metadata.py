"""What the Dagster UI shows for a crawl with faults: numeric metadata to plot, tables of failing items, checks that explain."""
from dagster import AssetKey, DagsterEventType


def events_of(crawl, name: str, event_type: DagsterEventType) -> list:
    run_id = crawl.run_ids[crawl.source_keys[name]]
    return [entry.dagster_event for entry in crawl.instance.all_logs(run_id, of_type=event_type)]


def table_rows(value) -> list[dict]:
    return [dict(record.data) for record in value.records]


def test_materializations_carry_numbers_the_ui_can_plot(faulty_crawl):
    records = faulty_crawl.instance.fetch_materializations(AssetKey("media_downloads"), limit=20).records
    demo = next(r for r in records if r.partition_key.endswith(faulty_crawl.shards["demo"]))
    metadata = demo.asset_materialization.metadata
    for key in ("items_new", "items_skipped", "items_ok", "items_failed", "bytes", "p50_ms", "p95_ms"):
        assert isinstance(metadata[key].value, (int, float)), key
    assert metadata["items_ok"].value == 9 and metadata["bytes"].value > 0


def test_a_stage_with_failing_items_carries_a_table_of_them(faulty_crawl):
    records = faulty_crawl.instance.fetch_materializations(AssetKey("media_downloads"), limit=20).records
    record = next(r for r in records if r.partition_key.endswith(faulty_crawl.shards["errors"]))
    metadata = record.asset_materialization.metadata
    assert metadata["items_failed"].value >= 1
    rows = table_rows(metadata["failures"])
    assert rows and {"canonical_url", "error_class", "state", "message"} <= set(rows[0])
    assert {row["error_class"] for row in rows} <= {"http_5xx", "not_found"}
    assert any(row["canonical_url"].endswith("/errors/broken.jpg") for row in rows)


def test_a_failed_partition_names_its_unfinished_items(faulty_crawl):
    failures = events_of(faulty_crawl, "errors", DagsterEventType.STEP_FAILURE)
    committed = [event for event in failures if event.step_key == "committed_media"]
    assert committed, "an item still failing after its retries must fail the partition"
    data = committed[0].step_failure_data
    assert "unfinished after their retries" in data.error.message
    rows = table_rows(data.user_failure_data.metadata["unfinished"])
    assert any(row["state"] == "retry_wait" and row["error_class"] == "http_5xx" for row in rows)


def test_checks_say_what_they_found(faulty_crawl):
    evaluations = [event.event_specific_data for event in
                   events_of(faulty_crawl, "demo", DagsterEventType.ASSET_CHECK_EVALUATION)]
    by_name = {evaluation.check_name: evaluation for evaluation in evaluations}
    hashes = by_name["committed_media_hashes_match"]
    assert hashes.passed and hashes.description and hashes.metadata["blobs_checked"].value == 9
    gone = by_name["committed_media_nothing_gone"]
    assert gone.passed and gone.description == "no item is gone"

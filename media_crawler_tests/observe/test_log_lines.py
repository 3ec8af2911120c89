"""The JSON log stream of a crawl with injected faults: every line parses, item lines carry every key, failures their class."""
import re
from collections import Counter

from media_crawler_tests.observe.support import ITEM_LINE_KEYS, TS_PATTERN

# The simulator's injected faults, by the end of their canonical URL (or source key for feed pages).
EXPECTED_FAILURES = {
    "/errors/missing.jpg": ("failed", "not_found"),
    "/errors/broken.jpg": ("failed", "http_5xx"),
    "/errors/throttled.jpg": ("retry", "rate_limited"),
    "/errors/truncated.jpg": ("retry", "truncated_body"),
    "/html/login-wall.jpg": ("failed", "bad_signature"),
    "bilibili-666": ("failed", "parse_error"),
    "facebook-42": ("failed", "auth"),
}


def test_every_line_is_one_json_object_with_a_utc_millisecond_timestamp(faulty_crawl):
    lines = faulty_crawl.raw_lines()
    assert len(lines) > 100
    records = faulty_crawl.records()  # raises on any line that is not JSON
    assert all(isinstance(record, dict) for record in records)
    for record in records:
        assert re.match(TS_PATTERN, record["ts"]), record["ts"]
        assert record["level"] in {"debug", "info", "warning", "error", "critical"}
        assert record["worker"]


def test_item_lines_carry_every_required_key_and_their_partition_ids(faulty_crawl):
    items = faulty_crawl.item_records()
    assert {record["stage"] for record in items} == {"fetch", "download", "verify", "commit"}
    shard_of = {key: faulty_crawl.shards[name] for name, key in faulty_crawl.source_keys.items()}
    partition_of_run = {run_id: f"{faulty_crawl.day}|{shard_of[source]}" for source, run_id in faulty_crawl.run_ids.items()}
    for record in items:
        missing = ITEM_LINE_KEYS - set(record)
        assert not missing, (missing, record)
        assert record["run_id"] in partition_of_run, record
        assert record["partition"] == partition_of_run[record["run_id"]]
        assert record["step"] in {"media_records", "media_downloads", "verified_media", "committed_media"}
        if record["outcome"] in ("failed", "retry"):
            assert record["error_class"], record
            assert record["level"] == "warning"
    committed = [r for r in items if r["stage"] == "commit" and r["outcome"] == "ok"]
    assert committed and all(r["bytes"] > 0 and r["task_id"].startswith("t_") and r["attempt"] >= 1
                             for r in committed)
    downloads = [r for r in items if r["stage"] == "download" and r["outcome"] == "ok"]
    assert downloads and all(r["bytes"] > 0 and r["duration_ms"] is not None for r in downloads)


def test_each_injected_fault_is_logged_with_its_error_class(faulty_crawl):
    failures = [r for r in faulty_crawl.item_records() if r["outcome"] in ("failed", "retry")]
    seen = {}
    for record in failures:
        key = next(k for k in EXPECTED_FAILURES if record["canonical_url"].endswith(k))
        seen.setdefault(key, set()).add((record["outcome"], record["error_class"]))
    for key, expected in EXPECTED_FAILURES.items():
        assert expected in seen.get(key, set()), (key, seen.get(key))
    # Nothing else failed, and no failure is logged under a class it does not have.
    assert all(classes <= {("failed", EXPECTED_FAILURES[k][1]), ("retry", EXPECTED_FAILURES[k][1])}
               for k, classes in seen.items())


def test_dagster_framework_events_share_the_format_and_correlation_ids(faulty_crawl):
    dagster = [r for r in faulty_crawl.records() if r["logger"] != "media_crawler.items" and "dagster_event_type" in r]
    types = Counter(record["dagster_event_type"] for record in dagster)
    assert types["STEP_START"] and types["ASSET_MATERIALIZATION"] and types["STEP_FAILURE"]
    assert {record["run_id"] for record in dagster} >= set(faulty_crawl.run_ids.values())


def test_download_progress_is_a_periodic_log_event_inside_runs(faulty_crawl):
    progress = [r for r in faulty_crawl.records() if r.get("event") == "progress"]
    assert progress, "each download step ends with a progress event"
    final = [r for r in progress if r["final"]]
    assert final and all(r["items_done"] == r["items_total"] and r["step"] == "media_downloads" for r in final)
    assert {"items_per_s", "bytes", "eta_s", "run_id", "partition"} <= set(final[0])


def test_a_crawl_shows_partitions_done_of_total_with_bytes_on_the_terminal(faulty_crawl):
    last = faulty_crawl.terminal_text.split("\r")[-1]
    assert last.startswith("crawl 5/5 partitions") and last.endswith("\n")
    assert " MB" in last or " KB" in last
    assert not any("crawl 5/5 partitions" in line for line in faulty_crawl.raw_lines()), "it stays off the JSON stream"

"""A shard's feeds are walked several at once (a real API answers in 100-300 ms), and
a failing one still stops none of the others, in the order the sources are listed.
How much the overlap saves in wall time is bench/limits.py's (shard_walk)."""
from __future__ import annotations

import threading
from contextlib import contextmanager

import yaml

from media_crawler.config import load_config
from media_crawler.models import DayWindow
from media_crawler.pipeline.discover import discover_sources
from media_crawler.pipeline.runtime import Runtime
from media_crawler_tests.one_answer_server import local_server

DAY = "2026-11-27"
JSON = {"Content-Type": "application/json"}
# How long the first two feed requests wait for each other: only a bound on a failing
# run (feeds walked one after another never meet), never a measurement.
MEETING_TIMEOUT_S = 10


@contextmanager
def slow_feed_server():
    """Answers every feed with an empty list (404 for paths naming 'broken'). The first two
    requests are held until both have arrived: `met` says they were in flight at once.
    `peak` is the most requests it held at once."""
    lock = threading.Lock()
    first_two = threading.Barrier(2)
    state = {"in_flight": 0, "peak": 0, "arrived": 0, "met": False}

    def answer(path: str):
        with lock:
            state["in_flight"] += 1
            state["peak"] = max(state["peak"], state["in_flight"])
            state["arrived"] += 1
            held = state["arrived"] <= 2
        if held:
            try:
                first_two.wait(MEETING_TIMEOUT_S)
                state["met"] = True
            except threading.BrokenBarrierError:
                pass  # the second request never came while the first was in flight
        with lock:
            state["in_flight"] -= 1
        return (404, JSON, b"{}") if "broken" in path else (200, JSON, b"[]")

    with local_server(answer) as origin:
        yield origin, state


def test_a_shards_feeds_are_walked_at_once_and_a_broken_one_stops_none(crawl_home):
    with slow_feed_server() as (origin, served):
        crawl_home.mkdir(parents=True, exist_ok=True)
        names = ["a", "b", "broken", "c", "d", "e", "f", "g"]
        path = crawl_home / "sources.yaml"
        path.write_text(yaml.safe_dump({
            "sources": [{"urls": f"{origin}/{name}.json"} for name in names], "allow_hosts": [origin],
            "platforms": {"urls": {"rate": 1000, "burst": 1000}}, "store": str(crawl_home / "store"),
            "ledger_url": f"sqlite:///{crawl_home / 'ledger.db'}"}))
        config = load_config(path)
        runtime = Runtime.from_config(config)
        try:
            found = discover_sources(runtime, config.sources, DayWindow.parse(DAY), run_id="run-1")
            assert served["met"], "the feeds were walked one after another"
            assert served["peak"] <= runtime.download_threads
            broken = config.sources[names.index("broken")].key
            assert [failure.source_key for failure in found.failures] == [broken]
            assert found.feeds_walked == len(names) - 1

            # The step's retry walks again only the feed that failed in this run.
            again = discover_sources(runtime, config.sources, DayWindow.parse(DAY), run_id="run-1")
            assert (again.feeds_already_done, again.feeds_walked, len(again.failures)) == (len(names) - 1, 0, 1)
        finally:
            runtime.close()


def test_the_feed_threads_fetch_lines_name_the_run_partition_and_step(crawl_home, caplog):
    """Feeds walked on threads of their own still log under the step's run, partition and
    step (the threads do not inherit the step's context variables by themselves)."""
    import json
    import logging

    from media_crawler.observe.events import correlation

    def answer(path: str):
        name = path.rsplit("/", 1)[-1].removesuffix(".json")
        return 200, JSON, json.dumps([{"url": f"{origin}/{name}.jpg", "type": "image"}]).encode()

    with local_server(answer) as origin:
        crawl_home.mkdir(parents=True, exist_ok=True)
        path = crawl_home / "sources.yaml"
        path.write_text(yaml.safe_dump({
            "sources": [{"urls": f"{origin}/{name}.json"} for name in "abcd"], "allow_hosts": [origin],
            "platforms": {"urls": {"rate": 1000, "burst": 1000}}, "store": str(crawl_home / "store"),
            "ledger_url": f"sqlite:///{crawl_home / 'ledger.db'}"}))
        config = load_config(path)
        runtime = Runtime.from_config(config)
        try:
            assert runtime.download_threads > 1, "the feeds must be walked on threads for this test"
            ids = {"run_id": "run-7", "partition": f"{DAY}|urls-s00", "step": "media_records"}
            with caplog.at_level(logging.INFO), correlation(**ids):
                found = discover_sources(runtime, config.sources, DayWindow.parse(DAY), run_id="run-7")
        finally:
            runtime.close()
    assert found.feeds_walked == 4
    fetches = [record for record in caplog.records if getattr(record, "stage", None) == "fetch"]
    assert {record.canonical_url.rsplit("/", 1)[-1] for record in fetches} >= {"a.jpg", "b.jpg", "c.jpg", "d.jpg"}
    assert {(record.run_id, record.partition, record.step) for record in fetches} == {tuple(ids.values())}

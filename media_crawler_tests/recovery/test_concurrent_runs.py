"""Two runs of the same partitions at once: leases let each item be downloaded and committed by exactly one of them."""
from __future__ import annotations

import json
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from media_crawler.config import load_config
from media_crawler.store.leases import claim_in_state
from media_crawler.pipeline.liveness import lease_owner
from media_crawler_sim.app import Behaviour
from media_crawler_sim.server import Simulator
from media_crawler.store.ledger import Ledger
from media_crawler_tests.ledger_columns import columns
from media_crawler_tests.recovery.crawl_worker import crawl
from media_crawler_tests.recovery.support import ForkServer, assert_converged, partition_truth, write_recovery_config

PARTITIONS = [("weibo-678", "2026-11-27"), ("bilibili-12345", "2026-11-26")]
TOKEN_ENV = {"FB_ACCESS_TOKEN": "test-token-FAKE9f8e7d6c"}


def item_events(log_path) -> list[dict]:
    events = []
    for line in log_path.read_text().splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("outcome") == "ok" and event.get("task_id"):
            events.append(event)
    return events


def test_two_runs_of_the_same_partitions_never_both_download_or_commit_an_item(crawl_home):
    with Simulator(seed=1, port=0, behaviour=Behaviour(media_latency_ms=60)) as sim:
        config = load_config(write_recovery_config(crawl_home, sim))
        specs = [f"{key}|{day}" for key, day in PARTITIONS]
        orders = {"a": specs, "b": list(reversed(specs))}  # opposite orders: A verifies what B downloads
        servers = {name: ForkServer(env=TOKEN_ENV) for name in orders}
        try:
            for server in servers.values():
                server.wait_ready()  # then both crawls start within milliseconds of each other
            with ThreadPoolExecutor(2) as pool:
                outcomes = list(pool.map(lambda name: servers[name].run(
                    config.path, orders[name], log=crawl_home / f"run-{name}.log"), orders))
        finally:
            for server in servers.values():
                server.close()
        assert all(outcome["exit"] == 0 for outcome in outcomes), outcomes
        by_run = {name: item_events(crawl_home / f"run-{name}.log") for name in orders}
        for stage in ("download", "commit"):
            done = Counter(event["task_id"] for events in by_run.values() for event in events
                           if event["stage"] == stage)
            assert done and max(done.values()) == 1, f"an item went through {stage} twice: {done.most_common(3)}"
        assert all(any(event["stage"] == "download" for event in events) for events in by_run.values()), \
            "both runs did part of the work: they really overlapped"
        media_gets = [entry["requests"] for path, entry in sim.app.stats.snapshot()["by_path"].items()
                      if path.startswith("/media")]
        assert max(media_gets) == 1, "each media file fetched once"
        assert_converged(config.store_root, Ledger(config.ledger_url), partition_truth(sim.truth(), PARTITIONS))


def test_stage_leases_split_rows_and_ignore_a_former_holders_result(crawl_home, simulator):
    config = load_config(write_recovery_config(crawl_home, simulator))
    crawl(str(config.path), [])  # migrate the ledger
    ledger = Ledger(config.ledger_url)
    from media_crawler.models import DayWindow
    from media_crawler.pipeline.discover import discover
    from media_crawler.pipeline.download import download_partition
    from media_crawler.pipeline.runtime import Runtime

    runtime = Runtime.from_config(config)
    source, window = config.source_by_key("weibo-678"), DayWindow.parse("2026-11-26")
    discover(runtime, source, window)
    download_partition(runtime, source, window)
    first, second = lease_owner("a"), lease_owner("b")
    taken = claim_in_state(ledger, "downloaded", source_key=source.key, day="2026-11-26", owner=first)
    assert taken and not claim_in_state(ledger, "downloaded", source_key=source.key, day="2026-11-26", owner=second)
    # The first holder's lease expires; the second takes the rows; the first's late result is ignored.
    ledger.apply([(task.id, first, columns(lease_expires_at=time.time() - 1)) for task in taken])
    retaken = claim_in_state(ledger, "downloaded", source_key=source.key, day="2026-11-26", owner=second)
    assert {t.id for t in retaken} == {t.id for t in taken}
    assert ledger.apply([(task.id, first, columns(state="discovered")) for task in taken]) == 0
    assert {t.state for t in ledger.tasks(source_key=source.key, day="2026-11-26")} == {"downloaded"}

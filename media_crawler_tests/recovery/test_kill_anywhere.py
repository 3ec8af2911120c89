"""Kill anywhere: SIGKILL a crawl at every named crash point and at seeded moments mid-download; restarts converge."""
from __future__ import annotations

import random
import signal
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from media_crawler.config import load_config
from media_crawler.platforms.registry import parse_source
from media_crawler.crashpoints import POINTS
from media_crawler.store.ledger import Ledger
from media_crawler_sim.app import Behaviour
from media_crawler_sim.server import Simulator
from media_crawler_tests.recovery.support import (
    ForkServer, assert_converged, committed_set, media_requests, partition_truth, write_recovery_config,
)

DAYS = {"weibo-678": "2026-11-26", "bilibili-12345": "2026-11-26", "facebook-42": "2026-11-25"}
# Each epoch: its own simulator and store, a shuffled plan of kills, then one clean run.
# Epochs run side by side: a crawl mostly waits (media latency, fsync), so they overlap well.
EPOCH_SEEDS = (11, 12, 13)
TOKEN_ENV = {"FB_ACCESS_TOKEN": "test-token-FAKE9f8e7d6c"}


def kill_plan(rng: random.Random) -> list[tuple[str, str | int]]:
    """Every named point (its 1st or 2nd hit) and three moments 'after k media answers'."""
    plan: list[tuple[str, str | int]] = [("point", f"{point}:{rng.randint(1, 2)}") for point in POINTS]
    plan += [("moment", rng.randint(1, 14)) for _ in range(3)]
    rng.shuffle(plan)
    return plan


def run_epoch(home, seed: int | None) -> tuple[Counter, int, set]:
    """Kill a crawl per the seed's plan (none: the uninterrupted reference), restart each
    time, then finish it and check convergence. Returns (kills, mid-download kills, committed set)."""
    kills: Counter[str] = Counter()
    mid_download = 0
    # Media answers take a while, so a kill chosen by "after k media answers" lands mid-download.
    with Simulator(seed=1, port=0, behaviour=Behaviour(media_latency_ms=40)) as sim:
        server = ForkServer(env=TOKEN_ENV)
        try:
            urls_key = parse_source("urls", f"{sim.base_url}/urls/demo.json").key
            partitions = [*DAYS.items(), (urls_key, "2026-11-27")]
            specs = [f"{key}|{day}" for key, day in partitions]
            config = load_config(write_recovery_config(home, sim))
            for kind, arg in (kill_plan(random.Random(seed)) if seed is not None else []):
                if kind == "point":
                    outcome = server.run(config.path, specs, crash_at=str(arg))
                else:
                    start = media_requests(sim)
                    outcome = server.run(config.path, specs, kill_when=lambda: media_requests(sim) >= start + arg)
                if outcome["signal"] == signal.SIGKILL:
                    kills[str(arg).split(":")[0] if kind == "point" else "moment"] += 1
                    if kind == "moment" and Ledger(config.ledger_url).state_counts().get("downloading"):
                        mid_download += 1
                else:
                    assert outcome["exit"] == 0, outcome
            final = server.run(config.path, specs)
            assert final["exit"] == 0, final
            ledger = Ledger(config.ledger_url)
            assert_converged(config.store_root, ledger, partition_truth(sim.truth(), partitions))
        finally:
            server.close()
    return kills, mid_download, committed_set(ledger)


def test_crawl_killed_anywhere_converges_to_the_simulator_truth(tmp_path):
    seeds = [None, *EPOCH_SEEDS]  # None: the same crawl, never killed
    with ThreadPoolExecutor(len(seeds)) as pool:
        reference, *epochs = pool.map(lambda seed: run_epoch(tmp_path / f"epoch-{seed}", seed), seeds)
    kills = sum((epoch_kills for epoch_kills, _, _ in epochs), Counter())
    mid_download = sum(count for _, count, _ in epochs)
    assert all(committed == reference[2] for _, _, committed in epochs), \
        "every killed crawl ends with the uninterrupted crawl's committed set (platform, item, variant, sha256)"
    print(f"kills: {sum(kills.values())} {dict(kills)}; mid-download: {mid_download}")
    assert sum(kills.values()) >= 20
    assert set(POINTS) <= set(kills), f"points never reached: {set(POINTS) - set(kills)}"
    assert mid_download >= 1

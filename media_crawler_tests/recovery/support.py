"""Shared checks of the recovery tests: what "converged" means for a set of partitions."""
from __future__ import annotations

import hashlib
import json
import os
import select
import subprocess
import sys
from collections import Counter
from pathlib import Path

import yaml
from sqlalchemy import func
from sqlalchemy import select as sql_select

from media_crawler.platforms.registry import parse_source
from media_crawler_sim.sources import demo_sources
from media_crawler.store.ledger import Ledger, T
from media_crawler_tests.conftest import without_rate_waits


def source_key_of(label: str) -> str:
    platform, spec = label.split(": ", 1)
    return parse_source(platform, spec).key


def partition_truth(truth: dict, partitions: list[tuple[str, str]]) -> set[str]:
    """sha256 of every media file the simulator says these (source_key, day) partitions hold."""
    wanted, sources = set(partitions), {source_key for source_key, _day in partitions}
    # URL-list items carry no publication day: they belong to whichever day's partition found them.
    return {item["sha256"] for item in truth["media"]
            if (source_key_of(item["source"]), item["day"]) in wanted
            or (item["day"] is None and source_key_of(item["source"]) in sources)}


def store_blobs(store_root: Path) -> dict[str, Path]:
    return {path.name: path for path in (store_root / "sha256").glob("*/*/*") if path.is_file()}


def committed_set(ledger: Ledger) -> set[tuple[str, str, str, str]]:
    return {(t.platform, t.item_id, t.variant, t.sha256) for t in ledger.tasks(states=["committed"])}


def assert_converged(store_root: Path, ledger: Ledger, expected: set[str]) -> None:
    """Store equals `expected`, blobs whole, no .part, every row committed, no duplicate rows."""
    blobs = store_blobs(store_root)
    assert set(blobs) == expected, {"missing": sorted(expected - set(blobs))[:5], "extra": sorted(set(blobs) - expected)[:5]}
    for name, path in blobs.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == name, f"corrupt blob {name}"
    assert not list((store_root / "staging").glob("*.part")), "leftover .part files"
    states = ledger.state_counts()
    assert set(states) <= {"committed"}, states
    assert {t.sha256 for t in ledger.tasks(states=["committed"])} == expected
    with ledger.engine.connect() as conn:
        keys = Counter(tuple(row) for row in conn.execute(sql_select(T.c.platform, T.c.item_id, T.c.variant)))
        leased = conn.execute(sql_select(func.count()).where(T.c.lease_owner.is_not(None))).scalar()
    assert max(keys.values()) == 1, "duplicate ledger rows"
    assert leased == 0, "leases left behind"


def media_requests(sim) -> int:
    """Media requests the simulator has answered so far (counted when the answer is sent)."""
    return sum(n for prefix, n in sim.app.stats.snapshot()["requests"].items() if prefix.startswith("/media"))


def write_recovery_config(home: Path, sim, sources: list[dict] | None = None, **extra) -> Path:
    """A sources.yaml pointed at `sim`, with its own store and ledger under `home`, and no
    request-rate limit worth waiting for (the rate budget is tested elsewhere)."""
    data = demo_sources(sim.base_url)
    if sources is not None:
        data["sources"] = sources
    without_rate_waits(data)
    data.update(store=str(home / "store"), ledger_url=f"sqlite:///{home / 'ledger.db'}", **extra)
    home.mkdir(parents=True, exist_ok=True)
    path = home / "sources.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


class ForkServer:
    """Drives crawl_worker --forks: one crawl per call, optionally killed at a crash
    point (crash_at) or when `kill_when()` turns true while the crawl runs."""

    def __init__(self, env: dict | None = None) -> None:
        repo = Path(__file__).resolve().parents[2]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "media_crawler_tests.recovery.crawl_worker", "--forks"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=repo,
            env={**os.environ, **(env or {})},
        )
        self._ready = False

    def wait_ready(self) -> "ForkServer":
        """Block until the server has imported everything (servers started together warm up together)."""
        if not self._ready:
            assert json.loads(self.proc.stdout.readline()) == {"ready": True}
            self._ready = True
        return self

    def run(self, config: Path, partitions: list[str], *, crash_at: str | None = None, kill_when=None,
            log: Path | None = None) -> dict:
        self.wait_ready()
        job = {"config": str(config), "partitions": partitions, "crash_at": crash_at,
               "log": str(log or config.parent / "crawl.log")}
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        started = json.loads(self.proc.stdout.readline())
        assert "started" in started, started
        kill_sent = False
        while True:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.005)
            if ready:
                return json.loads(self.proc.stdout.readline())
            if kill_when is not None and not kill_sent and kill_when():
                self.proc.stdin.write("kill\n")
                self.proc.stdin.flush()
                kill_sent = True

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=10)

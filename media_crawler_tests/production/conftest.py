"""Fixtures for the production tests: throwaway PostgreSQL databases, Dagster homes on them, the truth."""
from __future__ import annotations

import hashlib
import socket
import time
from pathlib import Path

import pytest
import requests
from dagster import DagsterRunStatus, RunsFilter

from media_crawler.deploy.services import REPO_ROOT
from media_crawler.deploy.workers import WorkerPlan, render_instance_yaml

POSTGRES_TEMPLATE = REPO_ROOT / "deploy" / "dagster.postgres.yaml"


@pytest.fixture(scope="module")
def pg_url(postgres) -> str:
    """One fresh database for the module: Dagster storage and the ledger share it, as in production."""
    return postgres.create()


@pytest.fixture
def pg_env(postgres, crawl_home, monkeypatch) -> str:
    """A fresh database for Dagster's storage and the ledger, both selected through the
    environment as deploy/dagster.postgres.yaml documents (after crawl_home, which clears the ledger URL)."""
    from media_crawler.environment import LEDGER_ENV

    url = postgres.create()
    monkeypatch.setenv("DAGSTER_PG_URL", url)
    monkeypatch.setenv(LEDGER_ENV, url)
    return url


def write_postgres_home(dagster_home: Path, workers: int = 2) -> Path:
    """DAGSTER_HOME with deploy/dagster.postgres.yaml rendered for `workers` (reads DAGSTER_PG_URL)."""
    dagster_home.mkdir(parents=True, exist_ok=True)
    (dagster_home / "dagster.yaml").write_text(render_instance_yaml(POSTGRES_TEMPLATE, WorkerPlan(workers)))
    return dagster_home


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def truth_of(simulator) -> dict:
    return requests.get(f"{simulator.base_url}/_sim/truth", timeout=10).json()


def expected_blobs(truth: dict, source_keys: set[str], days: set[str]) -> set[str]:
    """sha256 of every media file the simulator publishes for these sources and days
    (an undated URL-list item belongs to every day)."""
    from media_crawler.config import config_from_dict

    wanted = set()
    for item in truth["media"]:
        platform, spec = item["source"].split(": ", 1)
        key = config_from_dict({"sources": [{platform: _spec_with_base(spec, truth)}]}).sources[0].key
        if key in source_keys and (item["day"] in days or item["day"] is None):
            wanted.add(item["sha256"])
    return wanted


def _spec_with_base(spec: str, truth: dict) -> str:
    # The truth names URL-list feeds by path; the source key hashes the full URL.
    return f"{truth['base_url']}{spec}" if spec.startswith("/") else spec


def stored_blobs(store_root: Path) -> dict[str, Path]:
    return {path.name: path for path in (store_root / "sha256").glob("*/*/*") if path.is_file()}


def assert_store_sound(store_root: Path, expected: set[str]) -> None:
    """The store holds exactly `expected`, each blob re-hashes to its name, no .part is left."""
    stored = stored_blobs(store_root)
    assert set(stored) == expected, (sorted(set(expected) - set(stored))[:5], sorted(set(stored) - set(expected))[:5])
    for name, path in stored.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == name, f"corrupt blob {name}"
    assert not list((store_root / "staging").glob("*.part"))


# A run in one of these states will not change any more.
FINISHED_RUN = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}


def finished_runs(instance, job_name: str, partitions: list[str]):
    """The job's runs once every partition has one and none is still queued or running
    (a sensor may add a run of its own: the re-request sensor is on by default)."""
    runs = instance.get_runs(filters=RunsFilter(job_name=job_name))
    covered = {run.tags.get("dagster/partition") for run in runs}
    return runs if set(partitions) <= covered and all(run.status in FINISHED_RUN for run in runs) else None


def wait_until(predicate, timeout: float, interval: float = 1.0, what: str = "condition", on_tick=None):
    """Poll `predicate` until it returns a truthy value (returned); fail the test after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        if on_tick is not None:
            on_tick()
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)

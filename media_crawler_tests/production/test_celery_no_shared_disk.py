"""Workers that share no disk (issue 29): the crawl_celery job on two Celery workers, each
with a home, a staging folder and a DAGSTER_HOME of its own, Dagster's storage and the
ledger on PostgreSQL, the store in a SeaweedFS bucket. Nothing crosses between the
workers but the databases and the bucket (pipeline/settle_in_place.py: the download step
verifies and commits each item on the machine that holds its bytes).

1. A crawl split across both: every item committed once, nothing downloaded twice.
2. One worker SIGKILLed while it downloads: the other, then a re-launch and the sweep of
   the dead worker's staging, end with the bucket and ledger a clean run makes.
"""
from __future__ import annotations

import hashlib
import os
import signal
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus, RunsFilter

from media_crawler.commands.crawl import prepare_home
from media_crawler.config import load_config
from media_crawler.defs.celery import CELERY_JOB_NAME
from media_crawler.deploy.services import BIN, WORKSPACE, ServiceGroup, dagster_env
from media_crawler.crashpoints import AFTER_PART_WRITE
from media_crawler.environment import CELERY_CONFIG_ENV, CRASH_ENV
from media_crawler.store.ledger import DOWNLOADING, Ledger
from media_crawler.store.s3.settings import parse_uri
from media_crawler_tests import services
from media_crawler_tests.conftest import write_config
from media_crawler_tests.production.conftest import FINISHED_RUN, truth_of, wait_until, write_postgres_home
from media_crawler_tests.production.test_celery_backfill import celery_workers_of, celery_yaml  # noqa: F401 (fixture)

DAY = "2026-11-27"
SOURCES = [{"weibo": "user 678"}, {"weibo": "user 679", "api": "ajax"}, {"facebook": "page 43"}]
SOURCE_KEYS = {"weibo-678", "weibo-679", "facebook-43"}
WORKERS = ("w1", "w2")


@pytest.fixture(autouse=True)
def celery_installed():
    services.require_module("dagster_celery", "the celery extra: pip install -e '.[celery,test]'")


@dataclass
class Deployment:
    """The coordinator's side (daemon, DAGSTER_HOME) and each worker's own environment."""

    env: dict[str, str]
    dagster_home: Path
    worker_env: dict[str, dict[str, str]]
    worker_homes: dict[str, Path]
    celery_file: dict[str, Path]
    queue: str
    broker: str
    uri: str
    partitions: list[str]
    config_path: Path

    def node(self, name: str) -> str:
        return f"{name}-{self.queue}"

    def start_worker(self, group: ServiceGroup, name: str):
        return group.start(f"celery-{name}", [
            str(BIN / "dagster-celery"), "worker", "start", "-A", "dagster_celery.app", "-y",
            str(self.celery_file[name]), "-n", self.node(name), "-q", f"{self.queue},{self.queue}_{name}",
            "--", "--concurrency=1"], env=self.worker_env[name])

    def backfill(self) -> None:
        subprocess.run([str(BIN / "dagster"), "job", "backfill", "-w", str(WORKSPACE), "-j", CELERY_JOB_NAME,
                        "--partitions", ",".join(self.partitions), "--noprompt"],
                       env=self.env, check=True, timeout=180, capture_output=True)

    def staged_files(self) -> list[Path]:
        return [path for home in self.worker_homes.values() for path in (home / "store").rglob("*.part")]


@pytest.fixture
def deployment(pg_env, crawl_home, simulator, celery_yaml, s3_server, tmp_path, monkeypatch):  # noqa: F811
    """A coordinator home (the daemon's) and two worker homes that share no path."""
    for name, value in s3_server.environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    config_file, queue, broker = celery_yaml
    uri = s3_server.new_uri()
    dagster_home = write_postgres_home(tmp_path / "dagster_home", workers=4)
    config_path = write_config(crawl_home, simulator, SOURCES)
    data = yaml.safe_load(config_path.read_text())
    data["store"] = uri
    config_path.write_text(yaml.safe_dump(data))
    config = load_config(config_path)
    with DagsterInstance.from_config(str(dagster_home)) as instance:
        prepare_home(instance, config)
    env = dagster_env(dagster_home=dagster_home, config_path=config_path, media_home=crawl_home,
                      extra={CELERY_CONFIG_ENV: str(config_file)})
    worker_env, worker_homes, celery_files = {}, {}, {}
    for name in WORKERS:
        # Everything a worker reads or writes locally is under its own folder: its HOME, its
        # crawl home (store staging), its copy of sources.yaml and of the Celery settings,
        # its DAGSTER_HOME (the same instance: the settings name only the database).
        root = tmp_path / f"machine-{name}"
        home = root / "home"
        home.mkdir(parents=True)
        own_config = home / "sources.yaml"
        own_config.write_text(config_path.read_text())
        own_celery = root / "celery.yaml"
        own_celery.write_text(config_file.read_text())
        own_dagster = write_postgres_home(root / "dagster_home", workers=4)
        worker_env[name] = {"HOME": str(root), "MEDIA_CRAWLER_HOME": str(home), "MEDIA_CRAWLER_CONFIG": str(own_config),
                            "DAGSTER_HOME": str(own_dagster), CELERY_CONFIG_ENV: str(own_celery)}
        worker_homes[name], celery_files[name] = home, own_celery
    partitions = sorted({f"{DAY}|{config.layout.shard_of(key)}" for key in SOURCE_KEYS})
    return Deployment(env, dagster_home, worker_env, worker_homes, celery_files, queue, broker, uri, partitions,
                      config_path)


def runs_finished(instance):
    runs = instance.get_runs(filters=RunsFilter(job_name=CELERY_JOB_NAME))
    return runs if runs and all(run.status in FINISHED_RUN for run in runs) else None


def placements(instance, run_id: str) -> dict[str, str]:
    """step key -> the Celery worker that executed it (`name@host`, from the step's "Celery worker" engine event)."""
    placed = {}
    for record in instance.get_records_for_run(run_id, of_type=DagsterEventType.ENGINE_EVENT, limit=1000).records:
        metadata = record.event_log_entry.dagster_event.engine_event_data.metadata or {}
        if "Celery worker" in metadata:
            placed[record.event_log_entry.step_key] = str(metadata["Celery worker"].value)
    return placed


def steps_by_worker(instance, run_id: str) -> dict[str, str]:
    """step key -> w1 or w2."""
    return {step: name.split("-", 1)[0] for step, name in placements(instance, run_id).items()}


def worker_running(instance, step_key: str, node: str) -> str | None:
    """The full Celery name of `node` once it has started `step_key` in a run of the job, else None."""
    for run in instance.get_runs(filters=RunsFilter(job_name=CELERY_JOB_NAME)):
        name = placements(instance, run.run_id).get(step_key, "")
        if name.split("@")[0] == node:
            return name
    return None


def stop_consuming(broker: str, queue: str, worker: str) -> None:
    """Tell the Celery worker `worker` to take nothing more from `queue` (the step it runs goes on)."""
    from celery import Celery

    app = Celery(broker=broker)
    replies = app.control.cancel_consumer(queue, destination=[worker], reply=True, timeout=10)
    assert replies, f"{worker} did not answer the broker's cancel_consumer"


def full_answers(simulator) -> Counter:
    """Media path -> how many times the simulator sent it whole (200): a second one is a second download."""
    by_path = simulator.app.stats.snapshot()["by_path"]
    return Counter({path: entry["statuses"].get("200", 0) for path, entry in by_path.items()})


def downloaded_twice(before: Counter, after: Counter, paths: set[str]) -> list[str]:
    return sorted(path for path in paths if after[path] - before[path] > 1)


def bucket_state(s3_server, uri: str) -> dict[str, str]:
    """Key -> sha256 of its bytes, for the media objects (the answers' prefix aside)."""
    parsed = parse_uri(uri)
    client = s3_server.client()
    keys = [key for key, _size in client.list_keys(parsed.bucket, parsed.prefix + "/") if "/answers/" not in key]
    return {key: hashlib.sha256(client.get_object(parsed.bucket, key).content).hexdigest() for key in keys}


def assert_converged(deployment: Deployment, s3_server, expected: set[str]) -> set[tuple]:
    """The bucket holds exactly `expected`, once each, each object hashing to its key; every
    row is committed to one of them; no staged file and no unfinished upload anywhere.
    Returns the ledger's committed rows."""
    objects = bucket_state(s3_server, deployment.uri)
    names = [key.rsplit("/", 1)[1] for key in objects]
    assert all(digest == key.rsplit("/", 1)[1] for key, digest in objects.items()), "an object not hashing to its key"
    assert len(names) == len(set(names)) and set(names) == expected, \
        (sorted(expected - set(names))[:3], sorted(set(names) - expected)[:3])
    ledger = Ledger(os.environ["MEDIA_CRAWLER_LEDGER_URL"])
    assert set(ledger.state_counts()) == {"committed"}, ledger.state_counts()
    rows = {(t.platform, t.item_id, t.variant, t.sha256) for t in ledger.tasks(states=["committed"])}
    assert {row[3] for row in rows} == expected
    assert deployment.staged_files() == []
    parsed = parse_uri(deployment.uri)
    assert list(s3_server.client().list_multipart(parsed.bucket, parsed.prefix + "/")) == []
    return rows


def expected_media(simulator) -> tuple[set[str], set[str]]:
    """(sha256s, media paths) the simulator publishes for SOURCE_KEYS on DAY."""
    from media_crawler_tests.recovery.support import source_key_of

    media = [item for item in truth_of(simulator)["media"]
             if source_key_of(item["source"]) in SOURCE_KEYS and item["day"] == DAY]
    return {item["sha256"] for item in media}, {item["path"] for item in media}


def test_a_crawl_split_across_two_workers_commits_every_item_once(deployment, simulator, s3_server, tmp_path):
    expected, paths = expected_media(simulator)
    before = full_answers(simulator)
    with ServiceGroup(deployment.env, log_dir=tmp_path / "logs") as group:
        deployment.start_worker(group, "w1")  # alone at first: the first download step is its
        group.start_daemon()
        deployment.backfill()
        with DagsterInstance.from_config(str(deployment.dagster_home)) as instance:
            w1 = wait_until(lambda: worker_running(instance, "media_downloads", deployment.node("w1")), timeout=300,
                            interval=0.2, what="a download step on w1", on_tick=group.check_alive)
            # w1 finishes that download step and takes no further step: the run's verify and
            # commit steps, and whatever else is left, run on w2, which sees nothing of w1's disk.
            stop_consuming(deployment.broker, deployment.queue, w1)
            deployment.start_worker(group, "w2")
            runs = wait_until(lambda: runs_finished(instance) if len(instance.get_runs(
                filters=RunsFilter(job_name=CELERY_JOB_NAME))) >= len(deployment.partitions) else None,
                timeout=420, what="the split crawl's runs", on_tick=group.check_alive)
            workers = celery_workers_of(instance, [run.run_id for run in runs])
            placement = {run.run_id: steps_by_worker(instance, run.run_id) for run in runs}
    print(f"steps by worker: {placement}")
    after = full_answers(simulator)
    twice = downloaded_twice(before, after, paths)
    assert all(after[path] > before[path] for path in paths), "every media file was fetched whole (the count is real)"
    print(f"split crawl: {len(paths)} media files, downloaded twice: {len(twice)}")

    assert {run.status for run in runs} == {DagsterRunStatus.SUCCESS}
    assert {name.split("@")[0] for name in workers} == {deployment.node(name) for name in WORKERS}, workers
    assert any(steps.get("media_downloads") == "w1" and steps.get("committed_media") == "w2"
               for steps in placement.values()), f"no run was split between the machines: {placement}"
    assert_converged(deployment, s3_server, expected)
    assert twice == [], "a step on the other machine made an item be downloaded again"
    # Only the staging folders were ever written on the workers' disks: no blob is local.
    assert not [path for home in deployment.worker_homes.values() for path in (home / "store").rglob("sha256")]


def _downloading(ledger: Ledger) -> int:
    return ledger.state_counts().get(DOWNLOADING, 0)


def test_a_worker_killed_mid_download_the_other_and_a_relaunch_converge(deployment, simulator, s3_server, tmp_path):
    expected, _paths = expected_media(simulator)
    ledger = Ledger(os.environ["MEDIA_CRAWLER_LEDGER_URL"])
    # w1's step process SIGKILLs itself right after its first whole .part is on its disk
    # (crashpoints.py): the moment is certain, not raced. Celery then hands the step back
    # and w1 runs it again (and dies again) until the test SIGKILLs all of w1 below.
    deployment.worker_env["w1"][CRASH_ENV] = f"{AFTER_PART_WRITE}:1"
    with ServiceGroup(deployment.env, log_dir=tmp_path / "logs") as group:
        first = deployment.start_worker(group, "w1")  # alone at first: the first download step is its
        group.start_daemon()
        deployment.backfill()
        wait_until(lambda: deployment.staged_files() and _downloading(ledger), timeout=300, interval=0.2,
                   what="w1 dead with a download staged on its disk", on_tick=first.check_alive)
        os.killpg(first.pid, signal.SIGKILL)  # the whole worker: its Celery parent and its pool process
        first.process.wait()
        group.services.remove(first)
        staged_on_w1 = deployment.staged_files()
        deployment.start_worker(group, "w2")
        with DagsterInstance.from_config(str(deployment.dagster_home)) as instance:
            runs = wait_until(lambda: runs_finished(instance) if len(instance.get_runs(
                filters=RunsFilter(job_name=CELERY_JOB_NAME))) >= len(deployment.partitions) else None,
                timeout=420, what="the runs after the kill", on_tick=group.check_alive)
            relaunched = {run.status for run in runs} != {DagsterRunStatus.SUCCESS}
            if relaunched:
                deployment.backfill()  # the re-launch: w2 alone now
                wait_until(lambda: runs_finished(instance) if len(instance.get_runs(
                    filters=RunsFilter(job_name=CELERY_JOB_NAME))) >= 2 * len(deployment.partitions) else None,
                    timeout=420, what="the re-launched runs", on_tick=group.check_alive)
            latest = _latest_by_partition(instance)
            workers = celery_workers_of(instance, [run.run_id for run in instance.get_runs(
                filters=RunsFilter(job_name=CELERY_JOB_NAME))])
    print(f"killed: {len(staged_on_w1)} .part left on w1; re-launched: {relaunched}; steps ran on {sorted(workers)}")
    assert set(latest.values()) == {DagsterRunStatus.SUCCESS}, latest
    assert deployment.node("w2") in {name.split("@")[0] for name in workers}
    # The dead worker's disk still holds what it was downloading (nobody else can see it);
    # its sweep (reconcile on that machine, as its next download step also does) drops the
    # .parts of rows now committed.
    assert staged_on_w1 and all(path.is_relative_to(deployment.worker_homes["w1"]) for path in staged_on_w1)
    sweep = subprocess.run([str(BIN / "media-crawler"), "reconcile", "--repair", "--part-grace", "0"],
                           env={**deployment.env, **deployment.worker_env["w1"]}, capture_output=True, text=True,
                           timeout=120)
    assert sweep.returncode in (0, 1), sweep.stderr[-2000:]
    assert_converged(deployment, s3_server, expected)


def _latest_by_partition(instance) -> dict[str, DagsterRunStatus]:
    latest: dict[str, tuple[float, DagsterRunStatus]] = {}
    for record in instance.get_run_records(RunsFilter(job_name=CELERY_JOB_NAME)):
        key = record.dagster_run.tags.get("dagster/partition")
        if key not in latest or record.create_timestamp.timestamp() > latest[key][0]:
            latest[key] = (record.create_timestamp.timestamp(), record.dagster_run.status)
    return {key: status for key, (_at, status) in latest.items()}

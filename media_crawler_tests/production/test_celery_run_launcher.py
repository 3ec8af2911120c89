"""CeleryRunLauncher (deploy/celery_run_launcher.yaml): the daemon hands each run to a warm
Celery worker process, which executes the whole run (the crawl job's in-process executor);
a ranged run carries several shards there as anywhere else (issue 28)."""
from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest
import yaml
from dagster import AssetKey, DagsterInstance, DagsterRunStatus, RunsFilter

from media_crawler.commands.crawl import prepare_home
from media_crawler.config import load_config
from media_crawler.deploy.services import BIN, REPO_ROOT, WORKSPACE, ServiceGroup, dagster_env
from media_crawler.recovery.runs import PROCESS_TAG
from media_crawler.shards import partitions_of_run, range_tags
from media_crawler_tests import services
from media_crawler_tests.conftest import require_service, write_config
from media_crawler_tests.production.conftest import wait_until, write_postgres_home

DAY = "2026-11-27"
SOURCES = [{"weibo": "user 678"}, {"weibo": "user 679", "api": "ajax"}]


@pytest.fixture(autouse=True)
def celery_installed():
    services.require_module("dagster_celery", "the celery extra: pip install -e '.[celery,test]'")


def launcher_home(dagster_home, queue: str):
    """The production instance with deploy/celery_run_launcher.yaml merged in, on a queue of this test's own."""
    home = write_postgres_home(dagster_home, workers=2)
    instance_yaml = yaml.safe_load((home / "dagster.yaml").read_text())
    launcher = yaml.safe_load((REPO_ROOT / "deploy" / "celery_run_launcher.yaml").read_text())
    launcher["run_launcher"]["config"]["default_queue"] = queue
    (home / "dagster.yaml").write_text(yaml.safe_dump({**instance_yaml, **launcher}))
    return home, launcher["run_launcher"]["config"]


def worker_yaml(path, launcher_config: dict):
    """The worker's -y file: the launcher's broker and settings (the worker's app must match the launcher's)."""
    path.write_text(yaml.safe_dump({"execution": {"config": {
        "broker": launcher_config["broker"], "backend": launcher_config["backend"],
        "config_source": {**launcher_config["config_source"], "task_default_queue": launcher_config["default_queue"]},
    }}}))
    return path


def test_a_ranged_run_executes_inside_a_celery_worker(pg_env, crawl_home, simulator, tmp_path):
    require_service("RabbitMQ", 5672)
    require_service("Redis", 6379)
    queue = f"mc_runs_{uuid.uuid4().hex[:10]}"
    dagster_home, launcher = launcher_home(tmp_path / "dagster_home", queue)
    config_path = write_config(crawl_home, simulator, SOURCES)
    config = load_config(config_path)
    with DagsterInstance.from_config(str(dagster_home)) as instance:
        prepare_home(instance, config)  # creates the instance once: the worker and the daemon then only open it
    # Two consecutive weibo shards, the first holding weibo-678 (the other holds a source or none: both fine).
    weibo = [key for key in config.layout.shard_keys() if key.startswith("weibo-")]
    first = weibo.index(config.layout.shard_of("weibo-678"))
    tags = range_tags(DAY, weibo[first:first + 2] if first + 1 < len(weibo) else weibo[first - 1:first + 1])
    env = dagster_env(dagster_home=dagster_home, config_path=config_path, media_home=crawl_home)
    try:
        with ServiceGroup(env, log_dir=tmp_path / "logs") as group:
            worker = group.start_celery_worker(f"r1-{queue}", worker_yaml(tmp_path / "runs.yaml", launcher), [queue])
            group.start_daemon()
            subprocess.run([str(BIN / "dagster"), "job", "launch", "-w", str(WORKSPACE), "-j", "crawl",
                            "--tags", json.dumps(tags)], env=env, check=True, timeout=180, capture_output=True)
            with DagsterInstance.from_config(str(dagster_home)) as instance:
                def finished():
                    runs = [r.dagster_run for r in instance.get_run_records(RunsFilter(job_name="crawl"))]
                    return runs if runs and all(r.is_finished for r in runs) else None

                [run] = wait_until(finished, timeout=300, what="the ranged run on the Celery worker",
                                   on_tick=group.check_alive)
                events = instance.all_logs(run.run_id)
                materialized = set(instance.get_materialized_partitions(AssetKey("committed_media")))
                # The process the run recorded (recovery/runs.py), asked while the worker still runs.
                run_pid = int(run.tags[PROCESS_TAG].split("/")[1])
                run_process_group = os.getpgid(run_pid)
            worker_log = worker.log_tail(60)
    finally:
        _delete_queue(launcher["broker"], queue)

    assert run.status == DagsterRunStatus.SUCCESS, ([e.message for e in events if e.level >= 40][:5], worker_log)
    assert materialized == set(partitions_of_run(run.tags)) and len(materialized) >= 2
    assert any("forwarded to the broker" in (e.message or "") for e in events), "launched as a Celery task"
    # The run executed in the Celery worker's pool process, not in one the code server
    # spawned: dead-run detection (recovery/runs.py) watches that process.
    assert run_process_group == worker.pid and run_pid != worker.pid, (run_pid, worker.pid)


def _delete_queue(broker: str, queue: str) -> None:
    from kombu import Connection

    try:
        with Connection(broker, connect_timeout=5) as connection:
            connection.default_channel.queue_delete(queue)
    except Exception:  # noqa: BLE001 - the broker may already be gone; the queue is this test's own
        pass

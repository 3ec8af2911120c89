"""A backfill through the dagster-celery executor: two Celery workers on RabbitMQ share the steps, the store ends complete."""
from __future__ import annotations

import subprocess
import uuid

import pytest
import yaml
from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus

from media_crawler.commands.crawl import prepare_home
from media_crawler.config import load_config
from media_crawler.environment import CELERY_CONFIG_ENV
from media_crawler.defs.celery import CELERY_JOB_NAME
from media_crawler.deploy.services import BIN, REPO_ROOT, WORKSPACE, ServiceGroup, dagster_env
from media_crawler_tests import services
from media_crawler_tests.conftest import require_service, write_config
from media_crawler_tests.production.conftest import (
    assert_store_sound,
    expected_blobs,
    finished_runs,
    truth_of,
    wait_until,
    write_postgres_home,
)



@pytest.fixture(autouse=True)
def celery_installed():
    services.require_module("dagster_celery", "the celery extra: pip install -e '.[celery,test]'")

DAY = "2026-11-27"
SOURCES = [{"bilibili": "user 12345"}, {"weibo": "user 678"}, {"weibo": "user 679", "api": "ajax"},
           {"facebook": "page 42"}, {"facebook": "page 43"}]
SOURCE_KEYS = ["bilibili-12345", "weibo-678", "weibo-679", "facebook-42", "facebook-43"]


@pytest.fixture
def celery_yaml(tmp_path):
    """deploy/celery.yaml with a queue of this test's own: the broker may be shared with other test runs."""
    require_service("RabbitMQ", 5672)
    settings = yaml.safe_load((REPO_ROOT / "deploy" / "celery.yaml").read_text())
    executor = settings["execution"]["config"]
    queue = f"mc_test_{uuid.uuid4().hex[:10]}"
    executor["config_source"]["task_default_queue"] = queue
    path = tmp_path / "celery.yaml"
    path.write_text(yaml.safe_dump(settings))
    yield path, queue, executor["broker"]
    _delete_queues(executor["broker"], [queue, f"{queue}_w1", f"{queue}_w2"])


def _delete_queues(broker: str, queues: list[str]) -> None:
    from kombu import Connection

    try:
        with Connection(broker, connect_timeout=5) as connection:
            channel = connection.default_channel
            for queue in queues:
                channel.queue_delete(queue)
    except Exception:  # tidying the broker must not fail the test
        pass


def celery_workers_of(instance, run_ids) -> set[str]:
    """Worker names from the "Celery worker" metadata of each step's engine event."""
    names = set()
    for run_id in run_ids:
        records = instance.get_records_for_run(run_id, of_type=DagsterEventType.ENGINE_EVENT, limit=1000).records
        for record in records:
            metadata = record.event_log_entry.dagster_event.engine_event_data.metadata or {}
            if "Celery worker" in metadata:
                names.add(str(metadata["Celery worker"].value))
    return names


def test_a_backfill_on_two_celery_workers(pg_env, crawl_home, simulator, celery_yaml, tmp_path):
    config_file, queue, _broker = celery_yaml
    dagster_home = write_postgres_home(tmp_path / "dagster_home", workers=4)
    config_path = write_config(crawl_home, simulator, SOURCES)
    env = dagster_env(dagster_home=dagster_home, config_path=config_path, media_home=crawl_home,
                      extra={CELERY_CONFIG_ENV: str(config_file)})
    config = load_config(config_path)
    with DagsterInstance.from_config(str(dagster_home)) as instance:
        prepare_home(instance, config)  # creates the instance once: workers and daemon then only open it

    partitions = sorted({f"{DAY}|{config.layout.shard_of(key)}" for key in SOURCE_KEYS})
    # Node names of this run's own, like the queue: two workers with one name on one
    # broker fight over its exclusive `<name>.celery.pidbox` queue (RESOURCE_LOCKED),
    # which is what two test runs sharing this machine's RabbitMQ did.
    nodes = {name: f"{name}-{queue}" for name in ("w1", "w2")}
    with ServiceGroup(env, log_dir=tmp_path / "logs") as services:
        for name, node in nodes.items():
            services.start_celery_worker(node, config_file, queues=[queue, f"{queue}_{name}"])
        services.start_daemon()
        subprocess.run([str(BIN / "dagster"), "job", "backfill", "-w", str(WORKSPACE), "-j", CELERY_JOB_NAME,
                        "--partitions", ",".join(partitions), "--noprompt"],
                       env=env, check=True, timeout=180, capture_output=True)
        with DagsterInstance.from_config(str(dagster_home)) as instance:
            runs = wait_until(lambda: finished_runs(instance, CELERY_JOB_NAME, partitions), timeout=420,
                              what="the Celery backfill's runs", on_tick=services.check_alive)
            workers = celery_workers_of(instance, [run.run_id for run in runs])

    assert {run.status for run in runs} == {DagsterRunStatus.SUCCESS}, [(r.tags.get("dagster/partition"), r.status) for r in runs]
    assert {name.split("@")[0] for name in workers} == set(nodes.values()), f"steps ran on {workers}"
    truth = truth_of(simulator)
    assert_store_sound(config.store_root, expected_blobs(truth, set(SOURCE_KEYS), {DAY}))

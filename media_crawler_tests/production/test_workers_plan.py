"""`workers: N`: the plan's knobs, the dagster.yaml it renders, the platform tag on crawl runs, the Celery job's wiring."""
from __future__ import annotations

import pytest
import yaml
from dagster import DagsterInstance

from media_crawler.environment import WORKERS_ENV
from media_crawler.dagster_home import INSTANCE_TEMPLATE
from media_crawler.commands.ui import apply_worker_plan
from media_crawler.deploy.workers import (
    PLATFORM_TAG,
    RENDERED_MARKER,
    WorkerPlan,
    plan_from_environment,
    render_instance_yaml,
)
from media_crawler_tests import services
from media_crawler_tests.production.conftest import POSTGRES_TEMPLATE
from media_crawler_tests.shard_support import partition_of


@pytest.mark.parametrize(("workers", "per_platform", "threads"), [(1, 1, 4), (2, 2, 8), (4, 3, 16), (8, 6, 32)])
def test_one_number_drives_every_knob(workers, per_platform, threads):
    plan = WorkerPlan(workers)
    assert plan.max_concurrent_runs == plan.executor_max_concurrent == workers
    assert plan.runs_per_platform == per_platform
    assert plan.download_threads == 4 and plan.total_download_threads == threads


def test_nonsense_worker_counts_are_refused():
    for workers in (0, -1, 65):
        with pytest.raises(ValueError):
            WorkerPlan(workers)


@pytest.mark.parametrize("template", [INSTANCE_TEMPLATE, POSTGRES_TEMPLATE], ids=["sqlite", "postgres"])
def test_the_rendered_instance_keeps_the_template_and_sets_the_run_limits(template, tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_PG_URL", "postgresql+psycopg2://nobody@127.0.0.1:1/none")  # parsed, never dialled
    text = render_instance_yaml(template, WorkerPlan(4))
    assert text.startswith(RENDERED_MARKER)
    rendered, original = yaml.safe_load(text), yaml.safe_load(template.read_text())
    assert {key: value for key, value in rendered.items() if key != "concurrency"} == \
           {key: value for key, value in original.items() if key != "concurrency"}
    if template == INSTANCE_TEMPLATE:  # the SQLite one can be opened here without a server
        (tmp_path / "dagster.yaml").write_text(text)
        with DagsterInstance.from_config(str(tmp_path)) as instance:
            queue = instance.get_concurrency_config().run_queue_config
        assert queue.max_concurrent_runs == 4
        assert queue.tag_concurrency_limits == [
            {"key": PLATFORM_TAG, "value": {"applyLimitPerUniqueValue": True}, "limit": 3}]


def test_workers_come_from_the_environment_then_the_sources_file(tmp_path, monkeypatch):
    sources = tmp_path / "sources.yaml"
    sources.write_text("workers: 3\nsources: []\n")
    monkeypatch.delenv(WORKERS_ENV, raising=False)
    assert plan_from_environment(sources).workers == 3
    monkeypatch.setenv(WORKERS_ENV, "2")
    assert plan_from_environment(sources).workers == 2
    monkeypatch.delenv(WORKERS_ENV)
    sources.write_text("workers: [not, a, number]\n")
    assert plan_from_environment(sources).workers == 1  # the code location still loads
    assert plan_from_environment(tmp_path / "missing.yaml").workers == 1


def test_make_ui_renders_the_plan_but_leaves_a_hand_edited_instance_alone(tmp_path):
    instance_file = tmp_path / "dagster.yaml"
    instance_file.write_text(INSTANCE_TEMPLATE.read_text())  # what ensure_dagster_home copies
    assert apply_worker_plan(tmp_path, WorkerPlan(2))
    assert yaml.safe_load(instance_file.read_text())["concurrency"]["runs"]["max_concurrent_runs"] == 2
    assert apply_worker_plan(tmp_path, WorkerPlan(4))  # our own rendering is ours to redo
    instance_file.write_text("# mine\nconcurrency: {runs: {max_concurrent_runs: 9}}\n")
    assert not apply_worker_plan(tmp_path, WorkerPlan(4))
    assert "max_concurrent_runs: 9" in instance_file.read_text()


def test_every_crawl_run_is_tagged_with_its_platform():
    from media_crawler.definitions import build_definitions
    from media_crawler.shards import PartitionLayout

    job = build_definitions(PartitionLayout()).resolve_job_def("crawl")
    tags = job.partitioned_config.get_tags_for_partition_key(partition_of("2026-11-26", "weibo-679"))
    assert tags[PLATFORM_TAG] == "weibo"
    assert job.executor_def.name == "in_process", "a partition's chain of steps runs in one process"


def test_the_celery_job_takes_its_executor_settings_from_the_workers_yaml(tmp_path, monkeypatch):
    services.require_module("dagster_celery", "the celery extra: pip install -e '.[celery]'")
    from media_crawler.environment import CELERY_CONFIG_ENV
    from media_crawler.defs.celery import build_celery_crawl_job, celery_executor_config
    from media_crawler.shards import PartitionLayout

    settings = tmp_path / "celery.yaml"
    settings.write_text(yaml.safe_dump({"execution": {"config": {"broker": "redis://127.0.0.1:6379/0",
                                                                  "backend": "redis://127.0.0.1:6379/1"}}}))
    monkeypatch.setenv(CELERY_CONFIG_ENV, str(settings))
    assert celery_executor_config()["broker"] == "redis://127.0.0.1:6379/0"
    job = build_celery_crawl_job(PartitionLayout())
    assert job is not None and job.name == "crawl_celery"
    monkeypatch.delenv(CELERY_CONFIG_ENV)
    assert celery_executor_config()["config_source"]["task_acks_late"] is True

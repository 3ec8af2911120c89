"""Runs launched from the asset graph take the path `crawl` takes (issue 26, item 11):
one process per run, and the platform tag the per-platform run limit counts."""
from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus, SubmitRunContext
from dagster._core.remote_origin import InProcessCodeLocationOrigin, RemoteJobOrigin, RemoteRepositoryOrigin
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

from media_crawler.definitions import build_definitions
from media_crawler.deploy.run_coordinator import PlatformTaggingRunCoordinator, platform_of_run
from media_crawler.deploy.workers import PLATFORM_TAG
from media_crawler.shards import PartitionLayout

REPO = Path(__file__).resolve().parents[2]
SHIPPED_INSTANCES = [REPO / "dagster.yaml", REPO / "media_crawler" / "instance" / "dagster.yaml"]


def _origin(job_name: str) -> RemoteJobOrigin:
    """Where the webserver would say the run's job comes from (the queue requires one)."""
    location = InProcessCodeLocationOrigin(LoadableTargetOrigin(module_name="media_crawler.definitions"))
    return RemoteJobOrigin(RemoteRepositoryOrigin(location, "__repository__"), job_name)


def _definitions():
    with warnings.catch_warnings():  # Dagster's notes on renamed accessors
        warnings.simplefilter("ignore")
        return build_definitions(PartitionLayout())


def test_the_asset_graph_job_and_the_crawl_job_execute_in_process():
    defs = _definitions()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        asset_job = defs.get_implicit_global_asset_job_def()
        crawl_job = defs.resolve_job_def("crawl")
    assert asset_job.executor_def.name == "in_process"
    assert crawl_job.executor_def.name == "in_process"


@pytest.mark.parametrize("shipped", SHIPPED_INSTANCES, ids=lambda path: str(path.relative_to(REPO)))
def test_a_run_from_the_asset_graph_is_queued_with_its_platform_tag(tmp_path, shipped):
    shutil.copyfile(shipped, tmp_path / "dagster.yaml")
    with DagsterInstance.from_config(str(tmp_path)) as instance:
        assert isinstance(instance.run_coordinator, PlatformTaggingRunCoordinator)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            job = _definitions().get_implicit_global_asset_job_def()
        tags = {"dagster/partition": "2026-11-25|weibo-s03", "dagster/partition/day": "2026-11-25",
                "dagster/partition/shard": "weibo-s03"}
        run = instance.create_run_for_job(job, tags=tags, status=DagsterRunStatus.NOT_STARTED,
                                          remote_job_origin=_origin(job.name))

        instance.run_coordinator.submit_run(SubmitRunContext(run, workspace=None))

        stored = instance.get_run_by_id(run.run_id)
        assert stored.status == DagsterRunStatus.QUEUED
        assert stored.tags[PLATFORM_TAG] == "weibo"
        assert stored.tags["dagster/partition"] == "2026-11-25|weibo-s03"


def test_the_platform_comes_from_the_partition_only_when_it_is_a_shard():
    assert platform_of_run({"dagster/partition": "2026-11-25|bilibili-s01"}) == "bilibili"
    assert platform_of_run({"dagster/partition/shard": "urls-s00"}) == "urls"
    assert platform_of_run({"dagster/asset_partition_range_start": "2026-11-25|weibo-s04",
                            "dagster/asset_partition_range_end": "2026-11-25|weibo-s07"}) == "weibo"
    assert platform_of_run({"dagster/partition": "2026-11-25|nonsense"}) is None
    assert platform_of_run({}) is None


def test_every_shipped_instance_file_queues_through_the_tagging_coordinator():
    import yaml

    for path in [*SHIPPED_INSTANCES, REPO / "deploy" / "dagster.postgres.yaml"]:
        settings = yaml.safe_load(path.read_text())
        assert settings["run_coordinator"]["module"] == "media_crawler.deploy.run_coordinator", path
        assert settings["run_coordinator"]["class"] == PlatformTaggingRunCoordinator.__name__, path
        assert settings["telemetry"] == {"enabled": False}, path

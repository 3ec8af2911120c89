"""What store/dagster_private.py relies on past Dagster's public API, checked against the installed Dagster.

Each check names the private name or table it needs, so a pin bump that moves
one fails here with what moved, rather than at a deploy, a restore or a
`status` in production. Creates nothing but temporary SQLite files.
"""
from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

from media_crawler.store import dagster_private
from media_crawler.store.dagster_private import SqlRunStorage

PRIVATE_NAMES = [  # (module, attribute): every dagster._ name dagster_private.py imports
    ("dagster._grpc.client", "DagsterGrpcClient"),
    ("dagster._core.remote_origin", "InProcessCodeLocationOrigin"),
    ("dagster._core.types.loadable_target_origin", "LoadableTargetOrigin"),
    ("dagster._core.events", "JobFailureData"),
    ("dagster._core.events", "RunFailureReason"),
]


def private(module: str, name: str):
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        pytest.fail(f"Dagster moved {module}.{name} (store/dagster_private.py imports it): {exc}")


def parameters(function) -> set[str]:
    return set(inspect.signature(function).parameters)


def test_every_private_name_the_module_imports_is_listed_here():
    source = Path(dagster_private.__file__).read_text()
    imported = {(line.split()[1], name.strip()) for line in source.splitlines()
                if line.strip().startswith("from dagster._")
                for name in line.split(" import ", 1)[1].split(",")}
    assert imported == set(PRIVATE_NAMES), "update PRIVATE_NAMES and the checks below with the module"


@pytest.mark.parametrize("module,name", PRIVATE_NAMES)
def test_the_private_name_is_still_there(module, name):
    private(module, name)


def test_the_grpc_client_takes_host_and_port_and_answers_ping_and_list_repositories():
    client = private("dagster._grpc.client", "DagsterGrpcClient")
    assert {"host", "port"} <= parameters(client.__init__), "DagsterGrpcClient(host=, port=) changed"
    assert {"echo"} <= parameters(client.ping), "DagsterGrpcClient.ping(echo) changed"
    assert callable(getattr(client, "list_repositories", None)), "DagsterGrpcClient.list_repositories is gone"


def test_an_in_process_code_location_is_built_from_a_module_name():
    origin = private("dagster._core.remote_origin", "InProcessCodeLocationOrigin")
    target = private("dagster._core.types.loadable_target_origin", "LoadableTargetOrigin")
    assert {"loadable_target_origin", "location_name"} <= parameters(origin), "InProcessCodeLocationOrigin changed"
    assert {"instance"} <= parameters(origin.create_location), "InProcessCodeLocationOrigin.create_location changed"
    built = target(executable_path="python", module_name="media_crawler.definitions")
    assert (built.module_name, built.executable_path) == ("media_crawler.definitions", "python")


def test_unexpected_termination_is_failure_data_report_run_failed_accepts():
    from dagster import DagsterInstance

    data = dagster_private.unexpected_termination()
    reason = private("dagster._core.events", "RunFailureReason")
    assert isinstance(data, private("dagster._core.events", "JobFailureData"))
    assert data.failure_reason is reason.UNEXPECTED_TERMINATION and data.error is None
    assert "job_failure_data" in parameters(DagsterInstance.report_run_failed), "report_run_failed changed"


def test_the_failure_prefix_names_the_module_dagster_defines_failure_in():
    from dagster import Failure

    assert dagster_private.FAILURE_PREFIX == f"{Failure.__module__}.{Failure.__name__}: ", \
        f"Dagster's Failure moved to {Failure.__module__}: update FAILURE_PREFIX"


def test_the_tables_read_with_sql_still_have_the_columns_read():
    runs = private("dagster._core.storage.runs.schema", "RunsTable")
    events = private("dagster._core.storage.event_log.schema", "SqlEventLogStorageTable")
    storage = SqlRunStorage("sqlite://")
    for ours, theirs in ((storage.runs_table, runs), (storage.events_table, events)):
        assert ours.name == theirs.name, f"Dagster renamed the table {ours.name} to {theirs.name}"
        missing = set(ours.c.keys()) - set(theirs.c.keys())
        assert not missing, f"Dagster's {theirs.name} table no longer has the columns {sorted(missing)}"


def test_the_step_event_kinds_are_dagster_event_types():
    from dagster import DagsterEventType

    assert DagsterEventType.RUN_START.value == "PIPELINE_START", "RUN_START is stored under a new name"
    for kind in dagster_private.STEP_EVENT_KINDS:
        DagsterEventType(kind)


def test_the_sqlite_layout_is_where_dagster_writes_it(tmp_path):
    sqlite_storage = private("dagster._core.storage.sqlite_storage", "DagsterSqliteStorage").from_local(str(tmp_path))
    ours = SqlRunStorage.sqlite(tmp_path)
    assert ours.runs_path.is_file(), f"Dagster no longer keeps its runs in {ours.runs_path}"
    assert Path(sqlite_storage.event_log_storage.path_for_shard("a-run")) == ours.event_logs_dir / "a-run.db", \
        "Dagster moved the per-run event log files"
    assert ours.runs() == []


def test_a_run_coordinator_still_reaches_its_instance_through_underscore_instance():
    from dagster import QueuedRunCoordinator, SubmitRunContext

    owner = [cls.__name__ for cls in QueuedRunCoordinator.__mro__ if "_instance" in vars(cls)]
    assert owner, "QueuedRunCoordinator._instance is gone: update coordinator_instance in store/dagster_private.py"
    assert "dagster_run" in SubmitRunContext._fields, "SubmitRunContext(dagster_run=...) changed (run_coordinator.py)"

"""Pause and resume dispatch in a Dagster instance: nothing starts until an operator says so.

A restored instance must not act on its own the moment a daemon sees it:
its sensors would re-request partitions, its schedule would fire, its queued
runs would be dequeued, all against a ledger that has not been reconciled
yet. Pausing stops every sensor and schedule of the code location, cancels
queued runs, and fails runs that were in flight at backup time (their
processes are not part of this location). What was running is remembered in
`paused.json`, so resuming starts exactly that again.

Sensor and schedule states are stored by selector id (location, repository
and name), which is what the daemon reads, so loading the code location
in-process here stops the same sensors the daemon would run.
"""
from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

PAUSED_FILE = "paused.json"
DEFINITIONS_MODULE = "media_crawler.definitions"
LOCATION_NAME = "media_crawler"  # workspace.yaml's location_name: part of every selector id


@dataclass
class DispatchPause:
    sensors: list[str] = field(default_factory=list)  # running before the pause: resume starts these
    schedules: list[str] = field(default_factory=list)
    runs_canceled: list[str] = field(default_factory=list)
    runs_failed: list[str] = field(default_factory=list)

    def write(self, folder: Path) -> None:
        (folder / PAUSED_FILE).write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def read(cls, folder: Path) -> "DispatchPause":
        return cls(**json.loads((folder / PAUSED_FILE).read_text()))


@contextmanager
def code_location_repository(instance: DagsterInstance, location_name: str = LOCATION_NAME):
    from media_crawler.store.dagster_private import in_process_code_location

    with in_process_code_location(instance, DEFINITIONS_MODULE, location_name, sys.executable) as location:
        [repository] = location.get_repositories().values()  # Definitions make exactly one
        yield repository


def pause_dispatch(instance: DagsterInstance, location_name: str = LOCATION_NAME) -> DispatchPause:
    pause = DispatchPause()
    with code_location_repository(instance, location_name) as repo:
        for sensor in repo.get_sensors():
            stored = instance.get_instigator_state(sensor.get_remote_origin_id(), sensor.selector_id)
            if sensor.get_current_instigator_state(stored).is_running:
                pause.sensors.append(sensor.name)
            instance.stop_sensor(sensor.get_remote_origin_id(), sensor.selector_id, sensor)
        for schedule in repo.get_schedules():
            stored = instance.get_instigator_state(schedule.get_remote_origin_id(), schedule.selector_id)
            if schedule.get_current_instigator_state(stored).is_running:
                pause.schedules.append(schedule.name)
            instance.stop_schedule(schedule.get_remote_origin_id(), schedule.selector_id, schedule)
    waiting = [DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED]
    for record in instance.get_run_records(RunsFilter(statuses=waiting)):
        instance.report_run_canceled(record.dagster_run, message="canceled by restore: dispatch is paused")
        pause.runs_canceled.append(record.dagster_run.run_id)
    in_flight = [DagsterRunStatus.STARTING, DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING]
    for record in instance.get_run_records(RunsFilter(statuses=in_flight)):
        instance.report_run_failed(record.dagster_run, message="in flight when the backup was taken; its process "
                                   "is not part of this restored location (re-run the partition)")
        pause.runs_failed.append(record.dagster_run.run_id)
    return pause


def resume_dispatch(instance: DagsterInstance, pause: DispatchPause, location_name: str = LOCATION_NAME) -> list[str]:
    """Start again the sensors and schedules that ran before the pause; returns their names."""
    started = []
    with code_location_repository(instance, location_name) as repo:
        for sensor in repo.get_sensors():
            if sensor.name in pause.sensors:
                instance.start_sensor(sensor)
                started.append(sensor.name)
        for schedule in repo.get_schedules():
            if schedule.name in pause.schedules:
                instance.start_schedule(schedule)
                started.append(schedule.name)
    return started


def instigator_running(instance: DagsterInstance, location_name: str = LOCATION_NAME) -> dict[str, bool]:
    """Name -> whether the daemon would run it (for status output and tests)."""
    running = {}
    with code_location_repository(instance, location_name) as repo:
        for item in [*repo.get_sensors(), *repo.get_schedules()]:
            stored = instance.get_instigator_state(item.get_remote_origin_id(), item.selector_id)
            running[item.name] = item.get_current_instigator_state(stored).is_running
    return running

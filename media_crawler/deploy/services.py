"""The long-running processes of a deployment: the code server, dagster-daemon,
dagster-webserver, Celery workers.

Each starts in its own session (process group), because each spawns children
(code servers, run workers, Celery's pool) that must stop with it: stopping
sends SIGTERM to the whole group, waits until the group is empty, and only
then falls back to SIGKILL. `ServiceGroup` stops everything it started, in
reverse order, even when the code that started them raised.

The code server: with workspace.yaml's `python_module` entry, dagster-daemon
starts its own code server and replaces it every 60 seconds
(`RELOAD_WORKSPACE_INTERVAL` in dagster/_daemon/controller.py): each replacement
imports Dagster and the code location again (1.5-2.5 s of CPU with 6,400 sources)
and a run launched meanwhile waits for it (bench/SCALE.md). `start_code_server`
runs `dagster code-server start` as a service of its own, and the daemon and the
webserver started after it load the code location from it over gRPC, as
Dagster's production deployments do; it loads again only when asked (the UI's
Reload, or a restart).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import requests

from media_crawler.environment import environment_copy
from media_crawler.recovery.dispatch import DEFINITIONS_MODULE, LOCATION_NAME
from media_crawler.scrub import excerpt

BIN = Path(sys.executable).parent  # the venv's console scripts sit beside its python
REPO_ROOT = Path(__file__).resolve().parents[2]
WORKSPACE = REPO_ROOT / "workspace.yaml"


class ServiceError(RuntimeError):
    """A service died or did not become ready; the message carries its log's tail."""


@dataclass
class Service:
    name: str
    process: subprocess.Popen
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def check_alive(self) -> None:
        if not self.running():
            raise ServiceError(f"{self.name} exited with {self.process.returncode}:\n{self.log_tail()}")

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM the group, wait for every member to exit, SIGKILL what is left."""
        pgid = self.pid  # start_new_session: the leader's pid is the group id
        _signal_group(pgid, signal.SIGTERM)
        if not _wait_group_empty(pgid, self.process, timeout):
            _signal_group(pgid, signal.SIGKILL)
            _wait_group_empty(pgid, self.process, 5.0)


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _wait_group_empty(pgid: int, leader: subprocess.Popen, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        leader.poll()  # reap the leader, or it lingers as a zombie member of the group
        if not group_alive(pgid):
            return True
        time.sleep(0.1)
    return False


def start_service(name: str, argv: Sequence[str], *, env: Mapping[str, str], log_dir: Path,
                  cwd: Path = REPO_ROOT) -> Service:
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(list(argv), env=dict(env), cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    return Service(name, process, log_path)


class ServiceGroup:
    """Services started together and stopped together (reverse order)."""

    def __init__(self, env: Mapping[str, str], log_dir: Path, workspace: Path = WORKSPACE) -> None:
        self.env, self.log_dir, self.workspace = dict(env), log_dir, workspace
        self.services: list[Service] = []

    def __enter__(self) -> "ServiceGroup":
        return self

    def __exit__(self, *_exc) -> None:
        self.stop()

    def start(self, name: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> Service:
        service = start_service(name, argv, env={**self.env, **(env or {})}, log_dir=self.log_dir)
        self.services.append(service)
        return service

    def start_code_server(self, port: int, host: str = "127.0.0.1", timeout: float = 120.0) -> Service:
        """`dagster code-server start` on host:port, once it answers; the daemon and the
        webserver started after this load the code location from it (`grpc_workspace`)."""
        service = self.start("code-server", [
            str(BIN / "dagster"), "code-server", "start", "-m", DEFINITIONS_MODULE, "--location-name", LOCATION_NAME,
            "-h", host, "-p", str(port)])
        wait_for_code_server(host, port, service, timeout)
        self.workspace = grpc_workspace(self.log_dir / "workspace.yaml", host, port)
        return service

    def start_daemon(self) -> Service:
        return self.start("dagster-daemon", [str(BIN / "dagster-daemon"), "run", "-w", str(self.workspace)])

    def start_webserver(self, port: int, host: str = "127.0.0.1") -> Service:
        return self.start("dagster-webserver", [str(BIN / "dagster-webserver"), "-h", host, "-p", str(port),
                                                "-w", str(self.workspace)])

    def start_celery_worker(self, name: str, config_yaml: Path, queues: Sequence[str]) -> Service:
        # Queues comma-separated: a repeated -q keeps only the last one.
        return self.start(f"celery-{name}", [
            str(BIN / "dagster-celery"), "worker", "start", "-A", "dagster_celery.app", "-y", str(config_yaml),
            "-n", name, "-q", ",".join(queues), "--", "--concurrency=1",
        ])

    def check_alive(self) -> None:
        for service in self.services:
            service.check_alive()

    def stop(self) -> None:
        while self.services:
            self.services.pop().stop()


def dagster_env(*, dagster_home: Path, config_path: Path, media_home: Path | None = None,
                extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment every Dagster process of one deployment shares."""
    env = environment_copy(DAGSTER_HOME=str(dagster_home), MEDIA_CRAWLER_CONFIG=str(config_path))
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # run workers find the venv's dagster
    if media_home is not None:
        env["MEDIA_CRAWLER_HOME"] = str(media_home)
    env.update(extra or {})
    return env


def grpc_workspace(path: Path, host: str, port: int) -> Path:
    """A workspace file naming a running code server (deploy/workspace.grpc.yaml is the
    operators' copy of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"load_from:\n  - grpc_server:\n      host: {host}\n      port: {port}\n"
                    f"      location_name: {LOCATION_NAME}\n")
    return path


# --- readiness -------------------------------------------------------------------

def wait_for_code_server(host: str, port: int, service: Service, timeout: float = 120.0) -> None:
    """Until the code server answers a ping with its code loaded (or its process died)."""
    from media_crawler.store.dagster_private import grpc_client

    client = grpc_client(host, port)
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while time.monotonic() < deadline:
        service.check_alive()
        try:
            client.ping("ready?")
            client.list_repositories()  # answers once the code location has loaded
            return
        except Exception as error:  # grpc raises its own error types while the server starts
            last = str(error).splitlines()[0] if str(error) else type(error).__name__
        time.sleep(0.5)
    raise ServiceError(f"code server on {host}:{port} not ready after {timeout:.0f}s ({excerpt(last, 200)})\n"
                       f"{service.log_tail()}")


LOCATIONS_QUERY = """
query { workspaceOrError { __typename ... on Workspace { locationEntries { name loadStatus
  locationOrLoadError { __typename ... on PythonError { message } } } } } }
"""


def graphql(base_url: str, query: str, variables: Mapping | None = None, timeout: float = 30.0) -> dict:
    response = requests.post(f"{base_url}/graphql", json={"query": query, "variables": dict(variables or {})},
                             timeout=timeout)
    response.raise_for_status()
    body = response.json()
    if body.get("errors"):
        raise ServiceError(f"GraphQL errors: {body['errors']}")
    return body["data"]


def wait_for_webserver(base_url: str, group: ServiceGroup, timeout: float = 120.0,
                       stop: threading.Event | None = None) -> None:
    """Until every code location has loaded: /server_info answers before they do.
    Setting `stop` (Ctrl-C while starting) gives up at once."""
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while time.monotonic() < deadline:
        if stop is not None and stop.is_set():
            raise ServiceError("interrupted while starting")
        group.check_alive()
        try:
            workspace = graphql(base_url, LOCATIONS_QUERY, timeout=5)["workspaceOrError"]
            entries = workspace.get("locationEntries") or []
            errors = [e["locationOrLoadError"].get("message") for e in entries
                      if (e.get("locationOrLoadError") or {}).get("__typename") == "PythonError"]
            if errors:
                raise ServiceError(f"code location failed to load: {errors[0]}")
            if entries and all(entry["loadStatus"] == "LOADED" for entry in entries):
                return
            last = f"locations: {[(e['name'], e['loadStatus']) for e in entries]}"
        except (requests.RequestException, KeyError, ValueError) as error:
            last = str(error)
        time.sleep(0.5)
    raise ServiceError(f"webserver at {base_url} not ready after {timeout:.0f}s ({last})")

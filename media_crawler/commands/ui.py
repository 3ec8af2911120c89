"""`make ui`: the simulator, dagster-daemon and dagster-webserver on 127.0.0.1, until Ctrl-C.

    python -m media_crawler.commands.ui --home var [--port 3000] [--sim-port 8787] [--workers N]

Uses the same home as `make demo` (store, ledger, DAGSTER_HOME, demo/sources.yaml),
so the demo's runs show up in the UI. The demo sources are registered as
partitions before the daemon starts, so a partition can be materialized from
the UI at once. Ctrl-C (or SIGTERM) stops every process group it started.
Each service's output goes to <home>/ui/<service>.log; the terminal gets one
line per event.
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

import yaml

from media_crawler.commands.demo import start_simulator
from media_crawler.dagster_home import INSTANCE_TEMPLATE, ensure_dagster_home
from media_crawler.config import load_config
from media_crawler.environment import HOME_ENV, demo_config_path, environment_value, home_default, set_environment
from media_crawler.deploy.workers import RENDERED_MARKER, WorkerPlan, render_instance_yaml
from media_crawler_sim.sources import demo_environment, demo_sources


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--home", default=home_default(), help="store, ledger and Dagster home (default var)")
    parser.add_argument("--port", type=int, default=3000, help="dagster-webserver port on 127.0.0.1")
    parser.add_argument("--sim-port", type=int, default=8787, help="simulator port (0: any free port)")
    parser.add_argument("--seed", type=int, default=1, help="simulator world seed")
    parser.add_argument("--workers", type=int, default=None, help="workers: N for sources.yaml and the run limits")


def write_sources(home: Path, base_url: str, workers: int | None) -> Path:
    """The demo's sources.yaml (the same file `make demo` writes), pointed at this simulator."""
    path = demo_config_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = demo_sources(base_url)
    if workers:
        data["workers"] = workers
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def apply_worker_plan(dagster_home: Path, plan: WorkerPlan) -> bool:
    """Render the run limits into DAGSTER_HOME/dagster.yaml, unless a person edited that file."""
    instance_file = dagster_home / "dagster.yaml"
    current = instance_file.read_text() if instance_file.exists() else ""
    if current and current != INSTANCE_TEMPLATE.read_text() and not current.startswith(RENDERED_MARKER):
        return False  # hand-written instance settings win
    instance_file.write_text(render_instance_yaml(INSTANCE_TEMPLATE, plan))
    return True


def register_partitions(config_path: Path) -> list[str]:
    from dagster import DagsterInstance

    from media_crawler.commands.crawl import prepare_home

    with DagsterInstance.get() as instance:
        return prepare_home(instance, load_config(config_path))


def run(args: argparse.Namespace) -> int:
    from media_crawler.deploy.services import ServiceError, ServiceGroup, dagster_env, wait_for_webserver

    home = Path(args.home).resolve()
    set_environment(HOME_ENV, str(home))
    dagster_home = ensure_dagster_home(home)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())

    sim = start_simulator(args.sim_port, args.seed)
    try:
        config_path = write_sources(home, sim.base_url, args.workers)
        plan = WorkerPlan(load_config(config_path).workers)
        if not apply_worker_plan(dagster_home, plan):
            say(f"keeping the hand-edited {dagster_home / 'dagster.yaml'} (run limits not rendered)")
        keys = register_partitions(config_path)
        env = dagster_env(dagster_home=dagster_home, config_path=config_path, media_home=home,
                          extra={name: environment_value(name) or value for name, value in demo_environment().items()})
        url = f"http://127.0.0.1:{args.port}"
        with ServiceGroup(env, log_dir=home / "ui") as services:
            daemon = services.start_daemon()
            webserver = services.start_webserver(args.port)
            say(f"simulator {sim.base_url}; {len(keys)} sources registered; starting the daemon and the webserver ...")
            try:
                wait_for_webserver(url, services, stop=stop)
            except ServiceError as error:
                say(f"stopping: {error}")
                return 0 if stop.is_set() else 1
            # The one stdout line: tests and scripts parse it.
            print(f"ready {url} daemon_pid={daemon.pid} webserver_pid={webserver.pid}", flush=True)
            say(f"open {url}  (logs in {home / 'ui'}; Ctrl-C stops everything)")
            while not stop.wait(1.0):
                try:
                    services.check_alive()
                except ServiceError as error:
                    say(f"stopping: {error}")
                    return 1
            say("stopping the webserver and the daemon ...")
    finally:
        sim.stop()
    say("stopped")
    return 0


def say(message: str) -> None:
    print(f"make ui: {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m media_crawler.commands.ui", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())

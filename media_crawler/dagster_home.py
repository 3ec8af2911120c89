"""Where a local run keeps its state: MEDIA_CRAWLER_HOME (./var) and DAGSTER_HOME inside it."""
from __future__ import annotations

import shutil
from pathlib import Path

from media_crawler.config import DAGSTER_HOME_ENV, dagster_home_env, set_environment

INSTANCE_TEMPLATE = Path(__file__).resolve().parent / "instance" / "dagster.yaml"


def ensure_dagster_home(home: Path) -> Path:
    """Use $DAGSTER_HOME if set; else <home>/dagster_home with the project's instance settings."""
    path = dagster_home_env()
    if path is None:
        path = home / "dagster_home"
        set_environment(DAGSTER_HOME_ENV, str(path))
    path.mkdir(parents=True, exist_ok=True)
    if not (path / "dagster.yaml").exists():
        shutil.copyfile(INSTANCE_TEMPLATE, path / "dagster.yaml")
    return path


def local_instance():
    """The Dagster instance a command works with: $DAGSTER_HOME's as it is, else the local
    home's (<MEDIA_CRAWLER_HOME>/dagster_home, made with the project's settings on first
    use), so `media-crawler crawl` works on a fresh machine as `demo` does."""
    from dagster import DagsterInstance

    from media_crawler.config import home_dir

    if dagster_home_env() is None:
        ensure_dagster_home(home_dir())
    return DagsterInstance.get()

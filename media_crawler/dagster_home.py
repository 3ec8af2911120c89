"""Where a local run keeps its state: MEDIA_CRAWLER_HOME (./var) and the Dagster home.

One resolution for every command (`dagster_home_path`): $DAGSTER_HOME when set,
else <MEDIA_CRAWLER_HOME>/dagster_home, the folder `crawl` and `demo` make on a
fresh machine. `status`, `metrics`, `failures`, `health` and `backup` read the
same folder `crawl` wrote, and say which (observe/read_from.py).
"""
from __future__ import annotations

import shutil
from pathlib import Path

from media_crawler.environment import DAGSTER_HOME_ENV, dagster_home_env, home_dir, set_environment

INSTANCE_TEMPLATE = Path(__file__).resolve().parent / "instance" / "dagster.yaml"
HOME_FOLDER = "dagster_home"  # under MEDIA_CRAWLER_HOME when DAGSTER_HOME is not set


def dagster_home_path() -> Path:
    """The Dagster home every command uses: $DAGSTER_HOME, else <MEDIA_CRAWLER_HOME>/dagster_home."""
    return dagster_home_env() or home_dir() / HOME_FOLDER


def dagster_home_origin() -> str:
    """Why that folder: said beside it, so a reader knows which setting to change."""
    return "$DAGSTER_HOME" if dagster_home_env() else f"$MEDIA_CRAWLER_HOME/{HOME_FOLDER}, DAGSTER_HOME unset"


def ensure_dagster_home(home: Path) -> Path:
    """Use $DAGSTER_HOME if set; else <home>/dagster_home with the project's instance settings."""
    path = dagster_home_env()
    if path is None:
        path = home / HOME_FOLDER
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

    if dagster_home_env() is None:
        ensure_dagster_home(home_dir())
    return DagsterInstance.get()

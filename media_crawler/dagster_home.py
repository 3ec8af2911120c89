"""Where a local run keeps its state: MEDIA_CRAWLER_HOME (./var) and DAGSTER_HOME inside it."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

INSTANCE_TEMPLATE = Path(__file__).resolve().parent / "instance" / "dagster.yaml"


def ensure_dagster_home(home: Path) -> Path:
    """Use $DAGSTER_HOME if set; else <home>/dagster_home with the project's instance settings."""
    if os.environ.get("DAGSTER_HOME"):
        path = Path(os.environ["DAGSTER_HOME"])
    else:
        path = home / "dagster_home"
        os.environ["DAGSTER_HOME"] = str(path)
    path.mkdir(parents=True, exist_ok=True)
    if not (path / "dagster.yaml").exists():
        shutil.copyfile(INSTANCE_TEMPLATE, path / "dagster.yaml")
    return path

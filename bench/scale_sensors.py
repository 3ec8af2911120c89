"""The `sensors-10k` row of `python -m bench scale`: one tick of each sensor with 10,000
sources, on PostgreSQL and on SQLite (ledger and instance); `scale_ledger_scan` times the
same ticks on a big ledger."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import yaml

from bench.instruments import BIN
from bench.scale_postgres import createdb, dropdb

REPO = Path(__file__).resolve().parents[1]


def sensors_row(name: str, spec: dict, workdir: Path) -> dict:
    """One tick of each sensor with 10,000 sources, on PostgreSQL and on SQLite (ledger and instance)."""
    out = dict(row=name, kind="sensors", sources=10_000)
    sources = workdir / "sources10k.yaml"
    # 2,500 accounts per platform = 10,000 sources; --print-sources writes them without serving.
    with open(sources, "w") as handle:
        subprocess.run([str(BIN / "media-crawler"), "sim", "--accounts", "2500", "--days", "4", "--port", "8799",
                        "--print-sources"], stdout=handle, check=True)
    for backend in ("postgres", "sqlite"):
        sub = workdir / backend
        sub.mkdir()
        db = None
        if backend == "postgres":
            db, url = createdb()
        else:
            url = f"sqlite:///{sub / 'ledger.db'}"
        try:
            out[backend] = time_sensors(sources, sub, url, backend)
        finally:
            if db:
                dropdb(db)
    return out


def time_sensors(sources: Path, workdir: Path, ledger_url: str, backend: str) -> dict:
    from dagster import DagsterInstance, build_sensor_context

    from media_crawler.config import load_config
    from media_crawler.environment import LEDGER_ENV
    from media_crawler.defs.jobs import build_automation, build_crawl_job
    from media_crawler.defs.resources import crawl_resources
    from media_crawler.deploy.workers import WorkerPlan, render_instance_yaml

    data = yaml.safe_load(sources.read_text())
    data.setdefault("partitions", {})["shards"] = 16
    data["store"] = str(workdir / "store")
    data["ledger_url"] = ledger_url
    config_path = workdir / "sources.yaml"
    config_path.write_text(yaml.safe_dump(data, sort_keys=False))
    home = workdir / "dagster_home"
    home.mkdir()
    if backend == "postgres":
        os.environ["DAGSTER_PG_URL"] = ledger_url
        (home / "dagster.yaml").write_text(render_instance_yaml(REPO / "deploy" / "dagster.postgres.yaml", WorkerPlan(4)))
    else:
        (home / "dagster.yaml").write_text(render_instance_yaml(REPO / "media_crawler" / "instance" / "dagster.yaml", WorkerPlan(4)))
    os.environ[LEDGER_ENV] = ledger_url
    try:
        config = load_config(config_path)
        layout = config.layout
        _schedule, registration, unfinished = build_automation(layout, build_crawl_job(layout))
        result = dict(sources=len(config.sources), shards=len(layout.shard_keys()))
        with DagsterInstance.from_config(str(home)) as instance:
            for label, sensor_def in (("registration_first", registration), ("registration_steady", registration),
                                      ("registration_steady_2", registration), ("unfinished", unfinished),
                                      ("unfinished_2", unfinished)):
                t = time.perf_counter()
                with build_sensor_context(instance=instance,
                                          resources=crawl_resources(str(config_path))) as context:
                    value = sensor_def(context)
                value = list(value) if not hasattr(value, "skip_message") and isinstance(value, (list, tuple)) else value
                result[f"{label}_s"] = time.perf_counter() - t
                result[f"{label}_result"] = (f"{len(value)} run requests" if isinstance(value, list)
                                              else str(getattr(value, "skip_message", value))[:120])
        return result
    finally:
        os.environ.pop(LEDGER_ENV, None)
        os.environ.pop("DAGSTER_PG_URL", None)

"""Which home, ledger and Dagster storage a report read: said in every report.

An operator comparing `crawl`'s output with `status` must know both looked at the
same place; a report that read an empty default home would otherwise read as
"nothing is wrong". The Dagster home is the one resolution of dagster_home.py.
"""
from __future__ import annotations

from typing import Any

from media_crawler.config import CrawlConfig
from media_crawler.environment import home_dir
from media_crawler.dagster_home import dagster_home_origin, dagster_home_path
from media_crawler.store.urls import display_url


def read_from(config: CrawlConfig, dagster_read: bool = True) -> dict[str, Any]:
    """home, ledger, Dagster home (and why that one) and its storage, as shown to a person."""
    home = dagster_home_path()
    return {"home": str(home_dir()), "ledger": display_url(config.ledger_url), "dagster_home": str(home),
            "dagster_home_from": dagster_home_origin(),
            "dagster_storage": dagster_storage_text(home) if dagster_read else "not read (--no-dagster)"}


def dagster_storage_text(home) -> str:
    """The storage the home's dagster.yaml names, for a person: SQLite files where, or the database (no password)."""
    from media_crawler.observe.dagster_runs import sql_run_storage_for_home

    if not home.is_dir():
        return "none (the folder does not exist)"
    storage = sql_run_storage_for_home(home)
    if storage is None:
        return "as its dagster.yaml configures (read through Dagster)"
    if storage.runs_path is not None:
        return f"SQLite files in {storage.runs_path.parent}"
    return display_url(storage.runs_url)


def read_from_line(info: dict[str, Any]) -> str:
    return (f"read: ledger {info['ledger']}; Dagster home {info['dagster_home']} ({info['dagster_home_from']}), "
            f"storage {info['dagster_storage']}")

"""Helpers for the observability tests: crawl through Dagster with the JSON log stream captured."""
from __future__ import annotations

import io
import json
import logging
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import yaml

from media_crawler.commands.crawl import CrawlOutcome, crawl
from media_crawler_sim.sources import demo_sources
from media_crawler.observe.progress import TerminalSink

# Keys every per-item line carries (issue 5); ts, level and worker come from the formatter.
ITEM_LINE_KEYS = {"ts", "level", "worker", "task_id", "platform", "stage", "canonical_url", "attempt",
                  "duration_ms", "outcome", "run_id", "partition", "step"}
TS_PATTERN = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"


def write_sources(home: Path, base_url: str, sources: list[dict], partitions: dict | None = None,
                  **platform_overrides: dict) -> Path:
    """A sources.yaml pointed at the simulator, with its store and ledger named explicitly
    (so commands reading it later do not depend on MEDIA_CRAWLER_HOME)."""
    data = demo_sources(base_url)
    data["sources"] = sources
    if partitions is not None:
        data["partitions"] = partitions
    data["store"] = str(home / "store")
    data["ledger_url"] = f"sqlite:///{home / 'ledger.db'}"
    for platform, overrides in platform_overrides.items():
        data["platforms"].setdefault(platform, {}).update(overrides)
    home.mkdir(parents=True, exist_ok=True)
    path = home / "sources.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def dagster_log_settings(path: Path) -> dict:
    """Instance settings like dagster.yaml's python_logs, writing Dagster's events to a file."""
    return {"python_logs": {"python_log_level": "INFO", "dagster_handler_config": {
        "handlers": {"json": {"class": "logging.FileHandler", "filename": str(path), "formatter": "json"}},
        "formatters": {"json": {"()": "media_crawler.observe.logging.JsonFormatter"}},
    }}}


@dataclass
class CapturedCrawl:
    config_path: Path
    outcome: CrawlOutcome
    item_log: Path  # our JSON lines (media_crawler loggers)
    dagster_log: Path  # Dagster's framework events, same formatter
    instance: object = None
    run_ids: dict[str, str] = field(default_factory=dict)  # source_key -> run id of its shard's partition
    source_keys: dict[str, str] = field(default_factory=dict)  # a test's name for a source -> its key
    shards: dict[str, str] = field(default_factory=dict)  # a test's name for a source -> its shard
    day: str = ""
    started: float = 0.0  # unix seconds around the crawl: failure times must fall inside
    finished: float = 0.0
    terminal_text: str = ""  # the progress line(s) a terminal got

    def raw_lines(self) -> list[str]:
        return [line for path in (self.item_log, self.dagster_log) if path.exists()
                for line in path.read_text().splitlines()]

    def records(self) -> list[dict]:
        return [json.loads(line) for line in self.raw_lines()]

    def item_records(self) -> list[dict]:
        return [record for record in self.records() if record.get("logger") == "media_crawler.items"]


@contextmanager
def captured_crawl(config_path: Path, days: list[str], instance, log_dir: Path) -> Iterator[CapturedCrawl]:
    """Crawl with the `media_crawler` loggers writing JSON lines to a file; restore them afterwards."""
    from media_crawler.observe.logging import configure

    item_log = log_dir / "items.jsonl"
    logger = logging.getLogger("media_crawler")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    started = time.time()
    terminal = io.StringIO()
    with open(item_log, "a") as stream:
        configure(stream=stream)
        try:
            with warnings.catch_warnings():
                # Dagster flags yaml logging config as beta on every run (cli.main hides it too).
                warnings.filterwarnings("ignore", message=".*yaml-defined logging configuration.*")
                # What a person at a terminal would see on stderr while `crawl` or `demo` runs.
                outcome = crawl(config_path, days, instance=instance, progress_sinks=[TerminalSink(terminal)])
        finally:
            logger.handlers[:], logger.level, logger.propagate = saved
    run_ids = {key: partition.run_id for partition in outcome.partitions for key in partition.sources}
    yield CapturedCrawl(config_path, outcome, item_log, log_dir / "dagster.jsonl", instance, run_ids,
                        day=days[-1], started=started, finished=time.time(), terminal_text=terminal.getvalue())

"""The one resource the assets need: the crawl configuration and its runtime."""
from __future__ import annotations

import os
import threading

from dagster import ConfigurableResource

from media_crawler.config import CONFIG_ENV, CrawlConfig, load_config
from media_crawler.pipeline.runtime import Runtime

_RUNTIMES: dict[str, Runtime] = {}
_LOCK = threading.Lock()


class CrawlerResource(ConfigurableResource):
    """Points at sources.yaml; builds (once per process) the ledger, store and clients."""

    config_path: str = ""

    def resolved_path(self) -> str:
        return self.config_path or os.environ.get(CONFIG_ENV, "sources.yaml")

    def load(self) -> CrawlConfig:
        return load_config(self.resolved_path())

    def runtime(self) -> Runtime:
        path = os.path.abspath(self.resolved_path())
        with _LOCK:
            if path not in _RUNTIMES:
                _RUNTIMES[path] = Runtime.from_config(load_config(path))
            return _RUNTIMES[path]


def reset_runtimes() -> None:
    """Tests build many configurations in one process."""
    with _LOCK:
        _RUNTIMES.clear()

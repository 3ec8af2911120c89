"""The one resource the assets need: the crawl configuration and its runtime."""
from __future__ import annotations

import os
import threading

from dagster import ConfigurableResource

from media_crawler.config import CrawlConfig, config_path_default, load_config
from media_crawler.pipeline.runtime import Runtime

# By path and the file's version: an edited sources.yaml (a new source, a new shard
# count) is read again by the next step or tick of a long-lived process.
_RUNTIMES: dict[tuple[str, int, int], Runtime] = {}
_LOCK = threading.Lock()


class CrawlerResource(ConfigurableResource):
    """Points at sources.yaml; builds (once per process) the ledger, store and clients."""

    config_path: str = ""

    def resolved_path(self) -> str:
        return self.config_path or config_path_default()

    def load(self) -> CrawlConfig:
        return load_config(self.resolved_path())

    def runtime(self) -> Runtime:
        path = os.path.abspath(self.resolved_path())
        try:
            stat = os.stat(path)
            key = (path, stat.st_mtime_ns, stat.st_size)
        except OSError:
            key = (path, 0, 0)  # load_config says what is wrong with it
        with _LOCK:
            if key not in _RUNTIMES:
                for stale in [other for other in _RUNTIMES if other[0] == path]:
                    del _RUNTIMES[stale]
                _RUNTIMES[key] = Runtime.from_config(load_config(path))
            return _RUNTIMES[key]


def reset_runtimes() -> None:
    """Tests build many configurations in one process."""
    with _LOCK:
        _RUNTIMES.clear()

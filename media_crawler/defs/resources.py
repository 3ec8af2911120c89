"""The one resource the assets need: the crawl configuration and its runtime.

Dagster owns its lifetime: a runtime (ledger, store, HTTP session, rate budget) is
built on first use inside one step or one sensor tick, and closed when Dagster tears
the resource down after it. Nothing is cached across executions, so an edited
sources.yaml (a new source, a new shard count) is read by the next step or tick,
and tests need no reset. The file is read when the runtime is first asked for, not
when the resource is set up: a sensor can then answer "sources file unreadable"
instead of failing its tick.
"""
from __future__ import annotations

from dagster import ConfigurableResource, InitResourceContext
from pydantic import PrivateAttr

from media_crawler.config import CrawlConfig, config_path_default, load_config
from media_crawler.pipeline.runtime import Runtime


class CrawlerResource(ConfigurableResource):
    """Points at sources.yaml (default $MEDIA_CRAWLER_CONFIG, else ./sources.yaml)."""

    config_path: str = ""
    _runtime: Runtime | None = PrivateAttr(default=None)

    def resolved_path(self) -> str:
        return self.config_path or config_path_default()

    def load(self) -> CrawlConfig:
        return load_config(self.resolved_path())

    def runtime(self) -> Runtime:
        if self._runtime is None:
            self._runtime = Runtime.from_config(self.load())
        return self._runtime

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self._runtime is not None:
            self._runtime.close()
            self._runtime = None

"""The crawl's resources: its configuration, its ledger, its platforms.

- `crawl_config` (CrawlConfigResource): where sources.yaml is. The file is read when a
  step or tick first asks for it, not at setup, so a sensor can answer "sources file
  unreadable" with a SkipReason instead of failing its tick.
- `ledger` (LedgerResource): the ledger of that configuration, opened on first use.
- `platforms` (PlatformsResource): the platforms' side of a step, i.e. the HTTP session
  (made at setup, closed at teardown), the shared rate budget, the adapters and the
  masking of their credentials. It hands the pipeline its Runtime (pipeline/runtime.py),
  the one object the stage functions take.

Dagster owns their lifetime. Whatever a resource loads, it keeps for one step or one
tick and forgets at teardown, so an edited sources.yaml (a new source, a new shard
count, another ledger_url) is read by the next step or tick, and tests need no reset.

The two others depend on `crawl_config` as `configure_at_launch()` resources: Dagster
then gives every resource of an execution the same configuration instance, so the
file is read once per step and all three see the same file. A fully configured
resource nested in another is initialised as a separate copy (measured with Dagster
1.13), which would read the file once per copy and could read two versions of it
mid-edit. `crawl_resources()` builds the three; the launchpad may set
`resources.crawl_config.config.config_path`.

The blob store has no resource of its own: a BlobStore holds nothing to release (its
only I/O is creating two folders on first use), and only the asset steps use it, and
they need the platforms resource anyway. A resource for it would be ceremony.

Credentials stay where sources.yaml names them: `platforms.<name>.credential_env` names
the environment variables (the spec's default variable otherwise), config.py reads them
when a request needs them, and the scrubber masks their values. No value passes
through Dagster's resource config, so the UI and the run storage never hold one.
"""
# No `from __future__ import annotations` here: with postponed annotations Dagster does not
# see that `crawl_config` and `ledger` are resources, and refuses a configure_at_launch() value.

from typing import Any

import requests
from dagster import ConfigurableResource, InitResourceContext
from pydantic import PrivateAttr

from media_crawler.config import CrawlConfig, load_config
from media_crawler.environment import config_path_default
from media_crawler.pipeline.runtime import Runtime, runtime_session
from media_crawler.store.ledger import Ledger


class CrawlConfigResource(ConfigurableResource):
    """Points at sources.yaml (default $MEDIA_CRAWLER_CONFIG, else ./sources.yaml)."""

    config_path: str = ""
    _config: CrawlConfig | None = PrivateAttr(default=None)

    def resolved_path(self) -> str:
        return self.config_path or config_path_default()

    def load(self) -> CrawlConfig:
        """The configuration, read on the first call of this step or tick (ConfigError
        when the file is missing or wrong; asked again, it is read again)."""
        if self._config is None:
            self._config = load_config(self.resolved_path())
        return self._config

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        self._config = None


class LedgerResource(ConfigurableResource):
    """The ledger at the configuration's `ledger_url`, opened (and migrated) on first use.

    The SQLAlchemy engine and its connection pool stay per process
    (store/database.py), shared by every Ledger of a URL; teardown drops this
    execution's Ledger, so the next one reads ledger_url again."""

    crawl_config: CrawlConfigResource
    _ledger: Ledger | None = PrivateAttr(default=None)

    def get(self) -> Ledger:
        if self._ledger is None:
            self._ledger = Ledger(self.crawl_config.load().ledger_url)
        return self._ledger

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        self._ledger = None


class PlatformsResource(ConfigurableResource):
    """The HTTP session, rate budget and adapters of one step, as the pipeline's Runtime."""

    crawl_config: CrawlConfigResource
    ledger: LedgerResource
    _session: requests.Session | None = PrivateAttr(default=None)
    _runtime: Runtime | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._session = runtime_session()  # no I/O: connection pools fill on first request

    def runtime(self) -> Runtime:
        if self._runtime is None:
            if self._session is None:  # used outside Dagster (a direct call in a test)
                self._session = runtime_session()
            self._runtime = Runtime.from_config(self.crawl_config.load(), ledger=self.ledger.get(),
                                                session=self._session)
        return self._runtime

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self._session is not None:
            self._session.close()
        self._session = None
        self._runtime = None


def crawl_resources(config_path: str = "") -> dict[str, Any]:
    """The three resources under their keys, for Definitions, materialize() and
    build_sensor_context() (config_path: default $MEDIA_CRAWLER_CONFIG, else ./sources.yaml)."""
    crawl_config = CrawlConfigResource.configure_at_launch(**({"config_path": str(config_path)} if config_path else {}))
    ledger = LedgerResource.configure_at_launch(crawl_config=crawl_config)
    return {"crawl_config": crawl_config, "ledger": ledger,
            "platforms": PlatformsResource(crawl_config=crawl_config, ledger=ledger)}

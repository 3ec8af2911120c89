"""Everything a stage needs, built once per process from the configuration."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
import requests

from media_crawler.config import CrawlConfig
from media_crawler.deploy.workers import WorkerPlan
from media_crawler.models import Source
from media_crawler.observe.scrub import register_environment_secrets
from media_crawler.platforms.base import PlatformAdapter
from media_crawler.store.cas import BlobStore
from media_crawler.store.ledger import Ledger

# Requests per second and burst per platform: conservative defaults that keep
# a crawl below the platforms' published throttles. A plain URL list has no
# platform to protect, so it is unlimited unless `platforms.urls.rate` is set.
DEFAULT_RATES = {"bilibili": (5.0, 10.0), "weibo": (3.0, 6.0), "facebook": (5.0, 10.0)}


@dataclass
class Runtime:
    config: CrawlConfig
    ledger: Ledger
    store: BlobStore
    session: requests.Session
    download_threads: int = 8
    _adapters: dict[str, PlatformAdapter] = field(default_factory=dict)
    _allowed_hosts: dict[tuple[str, str | None], tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: CrawlConfig) -> "Runtime":
        from media_crawler.http import make_session

        # Adapters fall back to default variable names, so those are masked too.
        register_environment_secrets(
            env_name for settings in config.platforms.values() for env_name in settings.credential_env.values())
        # A worker (one run, one partition at a time) downloads with a fixed number
        # of threads; `workers: N` adds run slots, not threads (deploy/workers.py).
        threads = WorkerPlan(config.workers).download_threads
        return cls(
            config=config,
            ledger=Ledger(config.ledger_url),
            store=BlobStore(config.store_root).ensure(),
            session=make_session(pool_size=threads * 2),
            download_threads=threads,
        )

    @functools.cached_property
    def budget(self):
        from media_crawler.download.ratebudget import SharedRateBudget

        rates = dict(DEFAULT_RATES)
        for name, settings in self.config.platforms.items():
            if "rate" in settings.options:
                rates[name] = (float(settings.options["rate"]), float(settings.options.get("burst", settings.options["rate"])))
        return SharedRateBudget(self.ledger.engine, rates)

    @functools.cached_property
    def transport(self):
        from media_crawler.platforms.transport import RequestsTransport

        return RequestsTransport(session=self.session, before_request=self.budget.acquire,
                                 after_response=self._heed_usage_headers)

    def _heed_usage_headers(self, platform: str, response) -> None:
        """Facebook reports how close we are to its limits on every answer:
        slow the shared budget before it starts refusing, not after."""
        if platform != "facebook":
            return
        from media_crawler.platforms.facebook.usage import SLOWDOWN_FROM, usage_from_headers

        usage = usage_from_headers(response.headers)
        if usage is not None and usage.pressure > SLOWDOWN_FROM:
            factor = max(0.1, 1.0 - usage.pressure / 100.0)
            self.budget.penalize(platform, factor=factor, seconds=max(60.0, usage.delay_s))

    def adapter(self, platform: str) -> PlatformAdapter:
        adapter = self._adapters.get(platform)
        if adapter is None:
            from media_crawler.platforms.registry import build_adapter

            adapter = self._adapters[platform] = build_adapter(platform, self.config.settings_for(platform), self.transport)
        return adapter

    def allowed_hosts(self, platform: str, source_ident: str | None = None) -> tuple[str, ...]:
        """Where media for this platform may be fetched from (checked on every redirect hop).

        Asked once per item, answered from the configuration, which a runtime
        never changes: worked out once per platform and source."""
        key = (platform, source_ident)
        hosts = self._allowed_hosts.get(key)
        if hosts is None:
            hosts = self._allowed_hosts[key] = self._work_out_allowed_hosts(platform, source_ident)
        return hosts

    def _work_out_allowed_hosts(self, platform: str, source_ident: str | None) -> tuple[str, ...]:
        adapter_cls = type(self.adapter(platform))
        hosts = list(adapter_cls.default_media_hosts) + list(self.config.settings_for(platform).media_hosts)
        if platform == "urls":
            # A plain URL list may name any public host (internal addresses stay
            # refused by check_url), and media on the feed's own host.
            hosts.append("*")
            if source_ident:
                hosts.extend(adapter_cls.media_hosts_for(Source.parse("urls", source_ident)))
        return tuple(h for h in hosts + list(self.config.allow_hosts) if h)

"""Everything a stage needs, built once per process from the configuration."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
import requests

from media_crawler.config import CrawlConfig
from media_crawler.deploy.workers import WorkerPlan
from media_crawler.net.policy import UrlPolicy
from media_crawler.scrub import register_environment_secrets
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
    _policies: dict[tuple[str, str], UrlPolicy] = field(default_factory=dict)

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

        return RequestsTransport(session=self.session, policy_for=self.api_policy, before_request=self.budget.acquire,
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

    def allows_unknown_formats(self, platform: str) -> bool:
        """`platforms.<name>.allow_unknown_formats: true`: store bytes of no known media
        format (never documents or executables) as octet-stream instead of refusing them."""
        return self.config.settings_for(platform).options.get("allow_unknown_formats") is True

    def media_policy(self, platform: str, source_ident: str | None = None) -> UrlPolicy:
        """Where media for this platform may be fetched from (checked on every redirect hop):
        its CDN patterns, `media_hosts` and `allow_hosts`; for a plain URL list, any
        public host too. Worked out once per platform: the configuration never changes
        under a runtime. (`source_ident` is kept for callers; no policy depends on it.)"""
        policy = self._policies.get(("media", platform))
        if policy is None:
            adapter_cls = type(self.adapter(platform))
            entries = [*adapter_cls.default_media_hosts, *self.config.settings_for(platform).media_hosts,
                       *self.config.allow_hosts]
            if platform == "urls":
                entries.append("*")
            policy = self._policies[("media", platform)] = UrlPolicy.from_entries(entries)
        return policy

    def api_policy(self, platform: str) -> UrlPolicy:
        """Where API calls and feed pages (a URL feed's `next` links included) may go:
        any public host, the origins of `api_base` and `extra_api_bases` (operator
        configuration, so a simulator on 127.0.0.1 may be named there), and `allow_hosts`."""
        policy = self._policies.get(("api", platform))
        if policy is None:
            settings = self.config.settings_for(platform)
            bases = [settings.api_base, *settings.extra_api_bases.values()]
            entries = ["*", *(base for base in bases if base), *self.config.allow_hosts]
            policy = self._policies[("api", platform)] = UrlPolicy.from_entries(entries)
        return policy

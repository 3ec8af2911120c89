"""Prometheus metrics computed from the ledger on every scrape.

A custom Collector, not counters incremented in-process: the crawl runs in
many step processes (and on many hosts), and the ledger already holds every
count, so any one `media-crawler metrics` process can answer for all of them
with no shared registry. Labels are bounded: platform, stage, error_class,
state, quantile; never URLs, item ids, run ids or worker names.
"""
from __future__ import annotations

import time
from typing import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry
from sqlalchemy.engine import Engine

from media_crawler.config import CrawlConfig
from media_crawler.models import PLATFORMS
from media_crawler.observe import ledger_stats
from media_crawler.observe.status import disk_usage

PREFIX = "media_crawler"


class LedgerCollector(Collector):
    def __init__(self, engine: Engine, config: CrawlConfig, clock: Callable[[], float] = time.time) -> None:
        self.engine, self.config, self.clock = engine, config, clock

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(f"{PREFIX}_ledger_up", "1 when the ledger answered this scrape, else 0.")
        try:
            metrics = list(self._from_ledger(self.clock()))
        except Exception:  # a scrape must answer even when the database does not: that is the signal
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from metrics

    def _from_ledger(self, now: float) -> Iterator[Metric]:
        items = GaugeMetricFamily(f"{PREFIX}_items", "Ledger rows (media variants) per platform and state.",
                                  labels=["platform", "state"])
        for (platform, state), count in sorted(ledger_stats.state_counts(self.engine).items()):
            items.add_metric([platform, state], count)
        yield items

        committed = ledger_stats.committed_totals(self.engine)
        items_total = CounterMetricFamily(f"{PREFIX}_committed_items", "Items committed to the store.",
                                          labels=["platform"])
        bytes_total = CounterMetricFamily(f"{PREFIX}_committed_bytes", "Bytes of committed items.", labels=["platform"])
        for platform in sorted(committed):
            items_total.add_metric([platform], committed[platform]["items"])
            bytes_total.add_metric([platform], committed[platform]["bytes"])
        yield items_total
        yield bytes_total

        failing = GaugeMetricFamily(f"{PREFIX}_failing_items", "Items failing now, by the stage that failed them.",
                                    labels=["platform", "stage", "error_class", "state"])
        for labels, count in sorted(ledger_stats.failing_items(self.engine).items()):
            failing.add_metric(list(labels), count)
        for (platform, error_class), count in sorted(ledger_stats.unresolved_feed_errors(self.engine).items()):
            failing.add_metric([platform, "fetch", error_class, "page"], count)
        yield failing

        yield from self._backlog(now)
        yield from self._platforms(now)
        yield from self._delays(now)
        disk = disk_usage(self.config.store_root, self.config.min_free_bytes)
        free = GaugeMetricFamily(f"{PREFIX}_store_free_bytes", "Free bytes on the store's filesystem.")
        free.add_metric([], disk["free_bytes"])
        yield free

    def _backlog(self, now: float) -> Iterator[Metric]:
        oldest = GaugeMetricFamily(f"{PREFIX}_backlog_oldest_age_seconds",
                                   "Age in its state of the oldest unfinished row, per state.", labels=["state"])
        for state, entry in sorted(ledger_stats.backlog(self.engine, now).items()):
            oldest.add_metric([state], entry["oldest_age_s"])
        yield oldest
        leases = ledger_stats.expired_leases(self.engine, now)
        uncertain = GaugeMetricFamily(f"{PREFIX}_uncertain_items",
                                      "Items leased by a worker whose lease expired (the worker stopped renewing).",
                                      labels=["platform"])
        for platform, count in sorted(leases["by_platform"].items()):
            uncertain.add_metric([platform], count)
        yield uncertain

    def _platforms(self, now: float) -> Iterator[Metric]:
        health = ledger_stats.platform_health(self.engine, now, PLATFORMS)
        limited = GaugeMetricFamily(f"{PREFIX}_platform_rate_limited",
                                    "1 while the platform rate-limits us (errors in the last hour or budget slowed).",
                                    labels=["platform"])
        auth = GaugeMetricFamily(f"{PREFIX}_platform_auth_failures", "Auth failures in the last hour.",
                                 labels=["platform"])
        for platform, entry in sorted(health.items()):
            limited.add_metric([platform], 1 if entry["rate_limited"] else 0)
            auth.add_metric([platform], entry["auth_failures_1h"])
        yield limited
        yield auth

    def _delays(self, now: float) -> Iterator[Metric]:
        delays = ledger_stats.stage_delays(self.engine, now)
        quantiles = GaugeMetricFamily(
            f"{PREFIX}_stage_delay_seconds",
            f"Stage delay quantiles over items of the last {ledger_stats.DELAY_WINDOW_S / 3600:.0f} h "
            "(queue, claim, execution, verify, commit).", labels=["stage", "quantile"])
        counts = GaugeMetricFamily(f"{PREFIX}_stage_delay_items", "Items the stage delay quantiles are computed over.",
                                   labels=["stage"])
        for stage, entry in delays.items():
            counts.add_metric([stage], entry["count"])
            for quantile, key in (("0.5", "p50"), ("0.95", "p95"), ("1", "max")):
                if entry[key] is not None:
                    quantiles.add_metric([stage, quantile], entry[key])
        yield quantiles
        yield counts


def ledger_registry(engine: Engine, config: CrawlConfig) -> CollectorRegistry:
    """A registry of its own: no process metrics of the exporter mixed with the crawler's."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LedgerCollector(engine, config))
    return registry

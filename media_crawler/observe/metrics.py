"""Prometheus metrics computed from the ledger (and Dagster's run storage) on every scrape.

A custom Collector, not counters incremented in-process: the crawl runs in
many step processes (and on many hosts), and the ledger already holds every
count, so any one `media-crawler metrics` process can answer for all of them
with no shared registry. Labels are bounded: platform, stage, error_class,
reason, state (and `le`); never URLs, item ids, run ids or worker names.

What Prometheus can aggregate: delays are histograms with fixed buckets
(delays.DELAY_BUCKETS), cumulative over every committed item (read in
full on the first scrape, then only what was committed since:
delay_fold.CommittedDelays), so
`histogram_quantile(0.95, sum by (le, stage) (rate(media_crawler_stage_delay_seconds_bucket[1h])))`
works across instances and over time; outcomes are counters; backlog, oldest
ages and platform health are gauges. `promtool check metrics` passes on the
output (media_crawler_tests/observe/test_metrics_lint.py, test_outage_drill.py).
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

from media_crawler.config import CrawlConfig
from media_crawler.platforms.registry import names as platform_names
from media_crawler.observe import wait_summary
from media_crawler.store.reports import counts, delay_fold, delays, platform_signals, waiting
from media_crawler.observe.status import disk_usage
from media_crawler.store.database import Engine

PREFIX = "media_crawler"
HEALTH_STATES = ("ok", "degraded", "down", "rate_limited", "auth_failed")


def _buckets(counts: list[int], total: int, bounds: tuple[float, ...] = delays.DELAY_BUCKETS):
    return [*((floatToGoString(bound), count) for bound, count in zip(bounds, counts)), ("+Inf", total)]


class LedgerCollector(Collector):
    """instance: a DagsterInstance (optional) for queued runs, run queue and step start delays."""

    def __init__(self, engine: Engine, config: CrawlConfig, clock: Callable[[], float] = time.time,
                 instance=None) -> None:
        self.engine, self.config, self.clock, self.instance = engine, config, clock, instance
        self._run_delays = None
        self._delays = delay_fold.CommittedDelays(engine)
        self._lock = threading.Lock()  # the HTTP server answers scrapes on threads; the run delays are state

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(f"{PREFIX}_ledger_up", "1 when the ledger answered this scrape, else 0.")
        now = self.clock()
        with self._lock:
            runs, dagster = self._from_dagster(now)
            try:
                metrics = list(self._from_ledger(now, runs))
            except Exception:  # a scrape must answer even when the database does not: that is the signal
                up.add_metric([], 0)
                yield up
                yield from dagster
                return
        up.add_metric([], 1)
        yield up
        yield from metrics
        yield from dagster

    def _from_ledger(self, now: float, runs) -> Iterator[Metric]:
        items = GaugeMetricFamily(f"{PREFIX}_items", "Ledger rows (media variants) per platform and state.",
                                  labels=["platform", "state"])
        for (platform, state), count in sorted(counts.state_counts(self.engine).items()):
            items.add_metric([platform, state], count)
        yield items

        committed = counts.committed_totals(self.engine)
        items_total = CounterMetricFamily(f"{PREFIX}_committed_items", "Items committed to the store.",
                                          labels=["platform"])
        bytes_total = CounterMetricFamily(f"{PREFIX}_committed_bytes", "Bytes of committed items.", labels=["platform"])
        for platform in sorted(committed):
            items_total.add_metric([platform], committed[platform]["items"])
            bytes_total.add_metric([platform], committed[platform]["bytes"])
        yield items_total
        yield bytes_total
        finished = CounterMetricFamily(
            f"{PREFIX}_items_finished", "Items finished for good, by outcome (state committed or gone) and error class "
            "(none for committed).", labels=["platform", "state", "error_class"])
        for labels, count in counts.finished_outcomes(self.engine, committed).items():
            finished.add_metric(list(labels), count)
        yield finished
        last = GaugeMetricFamily(f"{PREFIX}_last_commit_timestamp_seconds",
                                 "Unix time of the latest commit to the store (absent while nothing is committed).")
        last_at = counts.last_commit_at(self.engine)
        if last_at is not None:
            last.add_metric([], last_at)
        yield last

        failing = GaugeMetricFamily(f"{PREFIX}_failing_items", "Items failing now, by the stage that failed them.",
                                    labels=["platform", "stage", "error_class", "state"])
        for labels, count in sorted(counts.failing_items(self.engine).items()):
            failing.add_metric(list(labels), count)
        for (platform, error_class), count in sorted(counts.unresolved_feed_errors(self.engine).items()):
            failing.add_metric([platform, "fetch", error_class, "page"], count)
        yield failing

        kept = GaugeMetricFamily(f"{PREFIX}_api_answers_kept", "API answers kept as fetched, for the archive.",
                                 labels=["platform"])
        kept_bytes = GaugeMetricFamily(f"{PREFIX}_api_answers_kept_bytes",
                                       "Bytes of the API answers kept (a body kept twice is stored once).",
                                       labels=["platform"])
        for platform, entry in sorted(counts.kept_answers(self.engine).items()):
            kept.add_metric([platform], entry["answers"])
            kept_bytes.add_metric([platform], entry["bytes"])
        yield kept
        yield kept_bytes

        yield from self._backlog(now, runs)
        yield from self._platforms(now)
        yield from self._histograms(now)
        disk = disk_usage(self.config.store_root, self.config.min_free_bytes)
        free = GaugeMetricFamily(f"{PREFIX}_store_free_bytes", "Free bytes on the store's filesystem.")
        free.add_metric([], disk["free_bytes"])
        yield free
        minimum = GaugeMetricFamily(f"{PREFIX}_store_min_free_bytes",
                                    "min_free_bytes: below it the disk guard stops admitting downloads.")
        minimum.add_metric([], disk["min_free_bytes"])
        yield minimum

    def _backlog(self, now: float, runs) -> Iterator[Metric]:
        oldest = GaugeMetricFamily(f"{PREFIX}_backlog_oldest_age_seconds",
                                   "Age in its state of the oldest unfinished row, per state.", labels=["state"])
        for state, entry in sorted(counts.backlog(self.engine, now).items()):
            oldest.add_metric([state], entry["oldest_age_s"])
        yield oldest

        binding = platform_signals.binding_budgets(self.engine, now)
        # Per partition only where Dagster holds a run for one (refine_with_runs), else per platform and reason.
        days = wait_summary.partition_days(runs.queued_partitions, runs.running_partitions) if runs else set()
        rows = waiting.waiting(self.engine, now, binding, partitions=days)
        if days:
            rows = wait_summary.refine_with_runs(rows, runs.queued_partitions, runs.running_partitions,
                                                 shard_of=self.config.layout.shard_of)
        by_reason = wait_summary.summarize_waiting(rows, now)
        count = GaugeMetricFamily(f"{PREFIX}_waiting_items",
                                  "Unfinished items by why they wait (one reason each, store/waits.py).",
                                  labels=["platform", "reason"])
        age = GaugeMetricFamily(f"{PREFIX}_waiting_oldest_age_seconds",
                                "How long the oldest item waiting for this reason has waited.",
                                labels=["platform", "reason"])
        retry_after = GaugeMetricFamily(f"{PREFIX}_waiting_retry_after_seconds",
                                        "Largest Retry-After the platform sent to an item still in retry backoff.",
                                        labels=["platform"])
        for reason, entry in by_reason.items():
            for platform, item in entry["platforms"].items():
                count.add_metric([platform, reason], item["count"])
                age.add_metric([platform, reason], item["oldest_age_s"])
                if reason == "retry_backoff" and item.get("retry_after_s_max") is not None:
                    retry_after.add_metric([platform], item["retry_after_s_max"])
        yield count
        yield age
        yield retry_after
        budget = GaugeMetricFamily(f"{PREFIX}_rate_budget_binding",
                                   "1 while the platform's shared rate budget is what its downloads wait for.",
                                   labels=["platform"])
        for platform in sorted(binding):
            budget.add_metric([platform], 1)
        yield budget

        leases = counts.expired_leases(self.engine, now)
        uncertain = GaugeMetricFamily(f"{PREFIX}_uncertain_items",
                                      "Items leased by a worker whose lease expired (the worker stopped renewing).",
                                      labels=["platform"])
        for platform, n in sorted(leases["by_platform"].items()):
            uncertain.add_metric([platform], n)
        yield uncertain
        uncertain_age = GaugeMetricFamily(f"{PREFIX}_uncertain_oldest_age_seconds",
                                          "Seconds since the oldest uncertain lease expired (absent when none).")
        if leases["oldest_expired_at"] is not None:
            uncertain_age.add_metric([], max(now - leases["oldest_expired_at"], 0.0))
        yield uncertain_age

    def _platforms(self, now: float) -> Iterator[Metric]:
        health = platform_signals.platform_health(self.engine, now, platform_names())
        # State, not a window: each lasts while the platform's latest failure of its kind is newer
        # than its latest success (store/reports/platform_incidents.py), so the alerts on it resolve.
        limited = GaugeMetricFamily(f"{PREFIX}_platform_rate_limited",
                                    "1 while the platform rate-limits us (no success since its latest rate limit, "
                                    "or the budget slowed).", labels=["platform"])
        auth = GaugeMetricFamily(f"{PREFIX}_platform_auth_failures",
                                 "Auth failures of the current auth incident (0 once a request succeeded after them).",
                                 labels=["platform"])
        status = GaugeMetricFamily(
            f"{PREFIX}_platform_status", "1 for the platform's current health (auth_failed, down, degraded, "
            "rate_limited, ok: the worst that lasts; a success ends it), 0 for the others.",
            labels=["platform", "state"])
        since = GaugeMetricFamily(f"{PREFIX}_platform_unhealthy_since_timestamp_seconds",
                                  "Unix time the platform's current outage began (while down or degraded).",
                                  labels=["platform"])
        ratio = GaugeMetricFamily(f"{PREFIX}_platform_failure_ratio",
                                  "Share of the last hour's media and feed requests that failed server-side "
                                  "(5xx, timeouts, resets).", labels=["platform"])
        for platform, entry in sorted(health.items()):
            limited.add_metric([platform], 1 if entry["rate_limited"] else 0)
            auth.add_metric([platform], entry["auth_failures"])
            for state in HEALTH_STATES:
                status.add_metric([platform, state], 1 if entry["status"] == state else 0)
            if entry["outage_since"] is not None:
                since.add_metric([platform], entry["outage_since"])
            ratio.add_metric([platform], entry["failure_ratio_1h"])
        yield from (limited, auth, status, since, ratio)

    def _histograms(self, now: float) -> Iterator[Metric]:
        histograms = self._delays.current(now)
        stage = HistogramMetricFamily(
            f"{PREFIX}_stage_delay_seconds", "Stage delays of committed items (queue, claim, execution, verify, "
            "commit), each measured on its own from the ledger's stage stamps.", labels=["platform", "stage"])
        for (platform, name), entry in histograms["stage"].items():
            stage.add_metric([platform, name], _buckets(entry["buckets"], entry["count"]), entry["sum"])
        yield stage
        wait = HistogramMetricFamily(
            f"{PREFIX}_wait_seconds", "Waits of committed items before their last claim, by reason (awaiting_run, "
            "retry_backoff, platform_halted, disk_guard), and for a worker thread after it (worker_slot).",
            labels=["platform", "reason"])
        for (platform, reason), entry in histograms["wait"].items():
            wait.add_metric([platform, reason], _buckets(entry["buckets"], entry["count"]), entry["sum"])
        yield wait
        complete = GaugeMetricFamily(
            f"{PREFIX}_delay_histograms_complete", "1 when the delay and wait histograms hold every committed item; 0 "
            "while a ledger never folded before is folded a chunk per scrape (they grow until then).")
        complete.add_metric([], 1 if self._delays.caught_up else 0)
        yield complete

    def _from_dagster(self, now: float):
        """(runs in flight or None, metric families): Dagster's queued runs and delay histograms."""
        if self.instance is None:
            return None, []
        from media_crawler.observe import dagster_runs

        up = GaugeMetricFamily(f"{PREFIX}_dagster_up", "1 when Dagster's run storage answered this scrape, else 0.")
        try:
            runs = dagster_runs.runs_in_flight(self.instance)
            if self._run_delays is None:
                self._run_delays = dagster_runs.RunDelayHistograms(self.instance, clock=self.clock)
            self._run_delays.update(now)
        except Exception:
            up.add_metric([], 0)
            return None, [up]
        up.add_metric([], 1)
        queued = GaugeMetricFamily(f"{PREFIX}_dagster_runs_queued", "Runs created and not yet dequeued.",
                                   labels=["platform"])
        oldest = GaugeMetricFamily(f"{PREFIX}_dagster_run_queue_oldest_age_seconds",
                                   "Age of the oldest run not yet dequeued.", labels=["platform"])
        for platform, entry in sorted(runs.queued.items()):
            queued.add_metric([platform], entry["count"])
            oldest.add_metric([platform], max(now - entry["oldest_since"], 0.0))
        delays = HistogramMetricFamily(f"{PREFIX}_dagster_run_queue_delay_seconds",
                                       "Run queue delay, created to started (counted since this exporter started).",
                                       labels=["platform"])
        for platform, histogram in sorted(self._run_delays.queue.items()):
            delays.add_metric([platform], _buckets(histogram.buckets, histogram.count), histogram.sum)
        steps = HistogramMetricFamily(f"{PREFIX}_dagster_step_start_delay_seconds",
                                      "Step start delay, from the event that let the step start (run start, the "
                                      "step before it succeeding) to its start (counted since this exporter started).",
                                      labels=["stage"])
        for name, histogram in sorted(self._run_delays.steps.items()):
            steps.add_metric([name], _buckets(histogram.buckets, histogram.count), histogram.sum)
        return runs, [up, queued, oldest, delays, steps]


def ledger_registry(engine: Engine, config: CrawlConfig, instance=None) -> CollectorRegistry:
    """A registry of its own: no process metrics of the exporter mixed with the crawler's."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LedgerCollector(engine, config, instance=instance))
    return registry

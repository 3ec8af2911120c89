"""Liveness and readiness probes for orchestrators (Kubernetes, systemd, a load balancer).

live:  the process runs and the ledger database answers a query.
ready: the database takes a write, the store takes a write, the store's disk
       has more than `min_free_bytes` free, every credential variable
       sources.yaml names for a crawled platform is set, and no platform is in
       an auth incident: its latest auth failure is newer than its latest
       success (a crawl would only collect more of them; a success after it
       ends it: store/reports/platform_incidents.py).
       Platforms whose requests mostly fail server-side are shown too
       (`platform_outage`: down or degraded, since when) without failing the
       probe: a platform's outage is not this worker's, the outage breaker
       already spares it, and the other platforms still need the worker.

Each probe returns a `ProbeResult`; the command prints it as one JSON line and
exits 0 (pass) or 1 (fail).
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from media_crawler.config import CrawlConfig
from media_crawler.platforms.registry import names as platform_names
from media_crawler.store.reports import platform_signals
from media_crawler.scrub import excerpt
from media_crawler.observe.status import disk_usage
from media_crawler.store.open_store import open_blob_store
from media_crawler.store.database import Engine
from media_crawler.store.reports import probes


class CheckFailed(Exception):
    """A check that ran and found a problem (its message is the whole reason)."""


@dataclass
class ProbeResult:
    probe: str
    ok: bool
    reason: str
    checks: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"probe": self.probe, "ok": self.ok, "reason": self.reason, "checks": self.checks}


def _timed(check: Callable[[], Any]) -> tuple[bool, str, float]:
    """Run one check: (passed, detail, milliseconds). A failure's text is scrubbed (DSNs hold passwords)."""
    started = time.monotonic()
    try:
        detail = check()
        return True, str(detail or "ok"), (time.monotonic() - started) * 1000
    except Exception as exc:  # any failure is the answer, not a crash of the probe
        text = str(exc) if isinstance(exc, CheckFailed) else f"{type(exc).__name__}: {exc}"
        return False, excerpt(text, 300), (time.monotonic() - started) * 1000


def live(engine: Engine) -> ProbeResult:
    passed, detail, ms = _timed(lambda: probes.select_one(engine))
    reason = f"database answered in {ms:.0f} ms" if passed else f"database did not answer: {detail}"
    return ProbeResult("live", passed, reason, {"database": {"ok": passed, "ms": round(ms, 1)}})


def ready(engine: Engine, config: CrawlConfig, now: float | None = None) -> ProbeResult:
    now = time.time() if now is None else now
    checks: dict[str, Any] = {}
    failures: list[str] = []

    def record(name: str, check: Callable[[], Any], failure: str) -> None:
        passed, detail, ms = _timed(check)
        checks[name] = {"ok": passed, "detail": detail, "ms": round(ms, 1)}
        if not passed:
            failures.append(f"{failure}: {detail}")

    record("database_writable", lambda: probes.probe_write(engine), "database not writable")
    record("store_writable", lambda: _probe_store(config), "store not writable")
    record("disk_free", lambda: _disk_above_minimum(config), "disk below min_free_bytes")
    # Both platform checks read one computation of the platforms' state.
    health = functools.cache(lambda: platform_signals.platform_health(engine, now, platform_names()))
    record("platform_auth", lambda: _no_auth_failures(health()), "platform in auth failure")
    record("credentials", lambda: _credentials_set(config), "credential not set")
    outages = _platform_outages(health)
    checks["platform_outage"] = outages
    reason = "; ".join(failures) if failures else "database and store writable, disk above minimum, no auth failure"
    if outages.get("platforms"):
        reason += "; " + outages["detail"] + " (not gating readiness)"
    return ProbeResult("ready", not failures, reason, checks)


def _probe_store(config: CrawlConfig) -> str:
    """Write, fsync and delete a probe where the store writes."""
    return open_blob_store(config.store_location, local_root=config.store_root).probe_writable()


def _disk_above_minimum(config: CrawlConfig) -> str:
    disk = disk_usage(config.store_root, config.min_free_bytes)
    if disk["below_minimum"]:
        raise CheckFailed(f"{disk['free_bytes']} bytes free < min_free_bytes {disk['min_free_bytes']}")
    return f"{disk['free_bytes']} bytes free"


def _platform_outages(health: Callable[[], dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Platforms down or degraded now (an outage incident lasts: platform_signals), since when.
    Always ok: shown, not gating (see the module docstring)."""
    from media_crawler.timestamps import utc_timestamp

    def check() -> dict[str, Any]:
        return {name: {"state": entry["outage_state"], "since": utc_timestamp(entry["outage_since"]),
                       "failure_ratio_1h": entry["failure_ratio_1h"]}
                for name, entry in health().items() if entry["outage_state"] != "ok"}

    result: dict[str, Any] = {}
    passed, detail, ms = _timed(lambda: result.update(check()))
    if not passed:
        return {"ok": True, "detail": f"not computed: {detail}", "ms": round(ms, 1), "platforms": {}}
    text = ", ".join(f"{name} {entry['state']} since {entry['since']}" for name, entry in sorted(result.items()))
    return {"ok": True, "detail": text or "no platform down or degraded", "ms": round(ms, 1), "platforms": result}


def _credentials_set(config: CrawlConfig) -> str:
    """Every variable `credential_env` names for a platform with sources is set (names, never values)."""
    from media_crawler.config import unset_credential_messages

    missing = unset_credential_messages(config)
    if missing:
        raise CheckFailed("; ".join(missing))
    return "every credential sources.yaml names is set"


def _no_auth_failures(health: dict[str, dict[str, Any]]) -> str:
    from media_crawler.timestamps import utc_timestamp

    failing = sorted(name for name, entry in health.items() if entry["auth_failures"])
    if failing:
        raise CheckFailed(", ".join(f"{name} (since {utc_timestamp(health[name]['auth_failed_since'])}, "
                                    f"{health[name]['auth_failures']} failure(s), no success since)"
                                    for name in failing))
    return "no platform in auth failure"

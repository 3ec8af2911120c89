"""Media misbehaviour for tests: fixed faults planned per path (the fault URL lists) and
seeded random 503s (`--fault-rate`).

Faults are decided per (path, attempt): the n-th GET of a path always gets the same
treatment for a given seed, so a failing crawl test replays exactly. A HEAD gets the
permanent faults (404, 500, HTML) but neither triggers nor consumes the one-shot and
random ones (there is no body to cut, and a probe should not use up the "first
request fails" of a retry test).
"""
from __future__ import annotations

import hashlib
import threading
from collections import Counter

NOT_FOUND = "not-found"  # 404, always
SERVER_ERROR = "server-error"  # 500, always
RATE_LIMITED_ONCE = "rate-limited-once"  # 429 + Retry-After: 1 on the first GET, then OK
CUT_ONCE = "cut-once"  # first GET: full Content-Length, half the body, connection closed
HTML_PAGE = "html-page"  # 200 text/html instead of the media, always
UNAVAILABLE = "unavailable"  # 503 + Retry-After: 1 (random, --fault-rate)

_ONCE = {RATE_LIMITED_ONCE, CUT_ONCE}
PLANNED_FAULTS = (NOT_FOUND, SERVER_ERROR, RATE_LIMITED_ONCE, CUT_ONCE, HTML_PAGE)


class FaultBook:
    def __init__(self, seed: int, fault_rate: float = 0.0) -> None:
        if not 0.0 <= fault_rate <= 1.0:
            raise ValueError("fault rate must be within 0..1")
        self._seed = seed
        self.fault_rate = fault_rate
        self._planned: dict[str, str] = {}
        self._attempts: Counter[str] = Counter()
        self._outages: dict[str, int] = {}  # platform -> status every media GET of it gets
        self._lock = threading.Lock()

    def plan(self, path: str, fault: str) -> None:
        if fault not in PLANNED_FAULTS:
            raise ValueError(f"unknown fault {fault!r}")
        self._planned[path] = fault

    def planned(self, path: str) -> str | None:
        return self._planned.get(path)

    def standing_fault(self, path: str) -> str | None:
        """The fault every request of `path` gets (what a HEAD sees)."""
        fault = self._planned.get(path)
        return None if fault in _ONCE else fault

    def next_fault(self, path: str) -> str | None:
        """Count one GET of `path` and say which fault, if any, it gets."""
        with self._lock:
            self._attempts[path] += 1
            attempt = self._attempts[path]
        fault = self._planned.get(path)
        if fault is not None:
            return None if (fault in _ONCE and attempt > 1) else fault
        if self.fault_rate and self._draw(path, attempt) < self.fault_rate:
            return UNAVAILABLE
        return None

    def _draw(self, path: str, attempt: int) -> float:
        digest = hashlib.sha256(f"{self._seed}|{path}|{attempt}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    def set_outage(self, platform: str, status: int | None) -> None:
        """Answer every media request of `platform` with `status` (an outage), until None."""
        with self._lock:
            if status:
                self._outages[platform] = int(status)
            else:
                self._outages.pop(platform, None)

    def outage(self, platform: str) -> int | None:
        return self._outages.get(platform)

    def outages(self) -> dict[str, int]:
        return dict(self._outages)

    def reset(self) -> None:
        with self._lock:
            self._attempts.clear()

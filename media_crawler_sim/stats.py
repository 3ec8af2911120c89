"""Request and byte counters for tests: how many requests each platform got, how many
bytes went out, per path and status (e.g. "a resumed download fetched only the rest",
"the crawler re-resolved the expired URL once")."""
from __future__ import annotations

import threading
from collections import Counter, defaultdict


def path_prefix(path: str) -> str:
    """`/bilibili/x/...` -> `/bilibili`; media are split by platform: `/media/weibo`."""
    segments = path.strip("/").split("/")
    depth = 2 if segments[0] == "media" and len(segments) > 1 else 1
    return "/" + "/".join(segments[:depth])


class RequestStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._requests: Counter[str] = Counter()
            self._bytes_sent = 0
            self._by_path: dict[str, dict] = defaultdict(lambda: {"requests": 0, "bytes": 0, "statuses": Counter()})

    def record(self, path: str, status: int, bytes_sent: int) -> None:
        with self._lock:
            self._requests[path_prefix(path)] += 1
            self._bytes_sent += bytes_sent
            entry = self._by_path[path]
            entry["requests"] += 1
            entry["bytes"] += bytes_sent
            entry["statuses"][str(status)] += 1

    def snapshot(self, per_path: bool = True) -> dict:
        """per_path=False: the totals only. A poller of a big world wants those: the
        per-path part holds every file ever served (10^5 entries, ~0.5 s to build and encode)."""
        with self._lock:
            totals = {"requests": dict(self._requests), "bytes_sent": self._bytes_sent}
            if not per_path:
                return totals
            return {**totals, "by_path": {path: {**entry, "statuses": dict(entry["statuses"])}
                                          for path, entry in self._by_path.items()}}

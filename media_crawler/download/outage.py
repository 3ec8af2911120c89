"""A platform that answers 500 for an hour must not burn every item's retries in a minute.

Per-item retries assume the item is the problem. When the platform is, every
item fails the same way, and retrying them all just spends their attempt
budgets (and hammers a struggling server). The breaker watches one download
stage: `threshold` items in a row that ended in a server-side failure, after
their own in-step retries, with no success in between, mean the platform is
down. The stage then stops handing that platform's items out; the untouched
items keep their attempts, the partition fails, and the
`unfinished_partitions_sensor` re-requests it with a growing delay (up to an
hour), so the backlog drains by itself once the platform recovers. Other
platforms are unaffected: they are other partitions, and other breakers.
"""
from __future__ import annotations

import threading
from collections import Counter

from media_crawler.errors import OUTAGE_CLASSES, CrawlError

OUTAGE_THRESHOLD = 3


class OutageBreaker:
    """Counts, per platform, items in a row that ended in an outage-class failure."""

    def __init__(self, threshold: int = OUTAGE_THRESHOLD) -> None:
        self.threshold = threshold
        self._streak: Counter[str] = Counter()
        self._lock = threading.Lock()  # download threads report concurrently

    def record(self, platform: str, error: CrawlError | None) -> bool:
        """Record one item's final outcome; True when the platform now counts as down."""
        with self._lock:
            if error is None:
                self._streak[platform] = 0
                return False
            if error.error_class not in OUTAGE_CLASSES:
                return False  # an item-specific failure says nothing about the platform
            self._streak[platform] += 1
            return self._streak[platform] >= self.threshold

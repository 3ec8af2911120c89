"""The demo's sources.yaml: the simulator's sources with every API base pointed at it.

Here, beside the simulator, because it is the simulator's own knowledge (its
paths, its accounts): every registered platform's simulator part (media_crawler_sim/parts.py)
adds its settings and sources. `media-crawler demo`, the UI stack, the generated
world's sources.yaml and the tests all start from it.
"""
from __future__ import annotations

from media_crawler_sim.builtin import DEMO_TOKEN_ENV

__all__ = ["DEMO_START_DAY", "DEMO_TOKEN_ENV", "demo_environment", "demo_sources"]

DEMO_START_DAY = "2026-11-20"


def demo_sources(base_url: str) -> dict:
    """The demo's sources.yaml: real adapters, API bases pointed at the simulator."""
    from media_crawler_sim.parts import simulator_parts

    parts = simulator_parts()
    return {
        # The simulator's origin (host and port): its CDN paths are on 127.0.0.1, which
        # the URL policy refuses unless listed, and then only on the port listed.
        "allow_hosts": [base_url],
        # Six sources need few shards, and the simulated world's days begin 2026-11-25:
        # the UI lists the demo's partitions without a year of empty days (docs/SHARDS.md).
        "partitions": {"start_day": DEMO_START_DAY, "shards": 2},
        "platforms": {name: part.demo_settings(base_url) for name, part in parts.items() if part.demo_settings},
        "sources": [source.as_entry(base_url) for part in parts.values() for source in part.demo_sources],
    }


def demo_environment() -> dict[str, str]:
    """Variables the demo sets when unset (a demo token no real platform would accept)."""
    from media_crawler_sim.parts import simulator_parts

    return {name: value for part in simulator_parts().values() for name, value in part.demo_environment}

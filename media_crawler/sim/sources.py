"""The demo's sources.yaml: the simulator's sources with every API base pointed at it.

Here, beside the simulator, because it is the simulator's own knowledge (its
paths, its accounts); `media-crawler demo`, the UI stack, the generated world's
sources.yaml and the tests all start from it.
"""
from __future__ import annotations

DEMO_TOKEN_ENV = "FB_ACCESS_TOKEN"
DEMO_START_DAY = "2026-11-20"


def demo_sources(base_url: str) -> dict:
    """The demo's sources.yaml: real adapters, API bases pointed at the simulator."""
    return {
        # The simulator's origin (host and port): its CDN paths are on 127.0.0.1, which
        # the URL policy refuses unless listed, and then only on the port listed.
        "allow_hosts": [base_url],
        # Six sources need few shards, and the simulated world's days begin 2026-11-25:
        # the UI lists the demo's partitions without a year of empty days (docs/SHARDS.md).
        "partitions": {"start_day": DEMO_START_DAY, "shards": 2},
        "platforms": {
            # mux off: the simulator's DASH tracks are valid ISO-BMFF boxes but hold no
            # playable samples, so a real ffmpeg would have nothing to mux.
            "bilibili": {"api_base": f"{base_url}/bilibili", "max_height": 1080, "mux": False},
            "weibo": {"api_base": f"{base_url}/weibo-m", "extra_api_bases": {"ajax": f"{base_url}/weibo"}},
            "facebook": {"api_base": f"{base_url}/facebook/v19.0", "credential_env": {"access_token": DEMO_TOKEN_ENV}},
        },
        "sources": [
            {"bilibili": "user 12345"},
            {"weibo": "user 678"},
            {"weibo": "user 679", "api": "ajax"},
            {"facebook": "page 42"},
            {"facebook": "page 43"},
            {"urls": f"{base_url}/urls/demo.json"},
        ],
    }

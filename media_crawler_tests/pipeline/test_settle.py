"""One settle path (pipeline/settle.py) for fetch-urls and the Dagster stages: each keeps
the stricter behaviour the two copies had apart."""
from __future__ import annotations

import errno
from dataclasses import fields
from datetime import date

from media_crawler.config import config_from_dict
from media_crawler.models import DayWindow
from media_crawler.pipeline import fetch_list as fetch_list_module
from media_crawler.pipeline.runtime import Runtime
from media_crawler.pipeline.settle import verify_staged
from media_crawler.platforms.registry import parse_source
from media_crawler.store import cas
from media_crawler.store.cas import FilesystemBlobStore
from media_crawler.store.ledger import Task
from media_crawler_tests.pipeline.test_fetch_urls import feed_items, fresh_sim, media_stats  # noqa: F401 - a fixture


def config_for(store, simulator, **extra):
    return config_from_dict({"store": str(store), "ledger_url": f"sqlite:///{store / 'ledger.db'}",
                             "allow_hosts": ["127.0.0.1:*"], "min_free_bytes": 1024**2,
                             "sources": [{"urls": f"{simulator.base_url}/urls/demo.json"}], **extra})


def test_a_full_disk_under_fetch_urls_commit_stops_further_downloads(fresh_sim, tmp_path, monkeypatch):
    def full_disk(self, staged, sha256, **_kwargs):
        raise cas.storage_error(OSError(errno.ENOSPC, "No space left on device"), "linking the blob")

    monkeypatch.setattr(FilesystemBlobStore, "put_if_absent", full_disk)
    config = config_for(tmp_path / "store", fresh_sim)
    source = parse_source("urls", f"{fresh_sim.base_url}/urls/demo.json")
    summary = fetch_list_module.fetch_list(config, source, DayWindow(date(2026, 11, 26)), workers=1, processes=1)
    fetched = sum(entry["requests"] for entry in media_stats(fresh_sim).values())
    # One worker and one waiting thread: at most the two items in flight when the disk filled.
    assert fetched <= 2 < len(feed_items(fresh_sim, "/urls/demo.json")), \
        "the commit stage stops touching the store on a full disk; so does fetch-urls"
    assert summary.states.get("committed", 0) == 0 and summary.states.get("discovered", 0) >= 1


def test_the_verify_stage_refuses_a_part_over_max_item_bytes(tmp_path):
    config = config_from_dict({"store": str(tmp_path / "store"), "ledger_url": f"sqlite:///{tmp_path / 'ledger.db'}",
                               "max_item_bytes": 1024})
    runtime = Runtime.from_config(config)
    task = Task(**{**{column.name: None for column in fields(Task)},
                   "id": 1, "platform": "urls", "item_id": "a", "variant": "file", "kind": "image",
                   "canonical_url": "https://example.org/a.png", "state": "downloaded", "attempts": 1})
    part = runtime.store.staging_path(task.staging_name)
    part.parent.mkdir(parents=True, exist_ok=True)
    part.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 4096)
    settled = verify_staged(runtime, task, sha256=None, size=part.stat().st_size, attempts=task.attempts)
    assert settled.error is not None and settled.error.error_class.value == "too_large"
    assert not part.exists()

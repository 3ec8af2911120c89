"""Compaction releases what only unfinished items need and keeps the seen-set and the manifest."""
from __future__ import annotations

import time

from dagster import DagsterInstance

from media_crawler.commands.crawl import crawl
from media_crawler.commands.export import manifest_rows
from media_crawler.config import load_config
from media_crawler.store.cas import FilesystemBlobStore
from media_crawler.store.compaction import compact, ledger_bytes, reclaim_space
from media_crawler.store.ledger import Ledger
from media_crawler_tests.recovery.support import media_requests, write_recovery_config

DAY = "2026-11-26"


def test_a_compacted_ledger_keeps_its_manifest_and_seen_set_and_shrinks(crawl_home, simulator):
    config = load_config(write_recovery_config(crawl_home, simulator))
    with DagsterInstance.ephemeral() as instance:
        assert not crawl(config.path, [DAY], instance=instance).failed
        ledger, store = Ledger(config.ledger_url), FilesystemBlobStore(config.store_root)
        manifest = list(manifest_rows(ledger, store))
        states = ledger.state_counts()
        reclaim_space(ledger)
        size_before = ledger_bytes(ledger)

        assert compact(ledger, before=time.time() - 3600, dry_run=True).rows == 0, "nothing finished an hour ago"
        counted = compact(ledger, before=time.time() + 1, dry_run=True)
        assert counted.rows == sum(states.values()), states
        done = compact(ledger, before=time.time() + 1)
        assert done.rows == counted.rows and compact(ledger, before=time.time() + 1).rows == 0, "idempotent"
        reclaim_space(ledger)

        compacted = list(manifest_rows(ledger, store))
        # Whole, plus the URI the archive files each downloaded item under (its media URL is gone).
        kept_uris = [(row.get("media_response") or {}).pop("uri", None) for row in compacted]
        assert compacted == manifest, "the manifest is kept whole"
        assert all(uri and uri.startswith("http") and "#" not in uri
                   for uri, row in zip(kept_uris, manifest) if row.get("media_response")), kept_uris
        assert ledger.state_counts() == states
        assert all(task.media_url == "" and not task.backup_urls for task in ledger.tasks())
        assert ledger_bytes(ledger) < size_before

        requests_before = media_requests(simulator)
        again = crawl(config.path, [DAY], instance=instance)
        assert not again.failed and media_requests(simulator) == requests_before, "the seen-set still holds"
        assert ledger.state_counts() == states

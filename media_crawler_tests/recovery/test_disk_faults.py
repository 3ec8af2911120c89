"""Disk faults: low free space stops admitting downloads; ENOSPC or a failed fsync is classified and never leaves a half-written blob."""
from __future__ import annotations

import errno
import hashlib

import pytest

from media_crawler.config import load_config
from media_crawler.download import fetcher
from media_crawler.models import DayWindow
from media_crawler.pipeline.discover import discover
from media_crawler.pipeline.download import download_partition
from media_crawler.pipeline.runtime import Runtime
from media_crawler.store import cas
from media_crawler.store.cas import FilesystemBlobStore
from media_crawler.store.ledger import Ledger
from media_crawler_tests.recovery.crawl_worker import crawl
from media_crawler_tests.recovery.support import (
    assert_converged, media_requests, partition_truth, store_blobs, write_recovery_config,
)

PARTITION = ("weibo-678", "2026-11-26")
SPEC = "|".join(PARTITION)


@pytest.fixture
def config(crawl_home, simulator):
    return load_config(write_recovery_config(crawl_home, simulator, min_free_bytes=10 * 1024**2))


def assert_no_half_written_blob(config) -> None:
    for name, path in store_blobs(config.store_root).items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == name


def finish_and_check(config, simulator) -> None:
    """The fault is gone: one more crawl converges."""
    crawl(str(config.path), [SPEC])
    assert_converged(config.store_root, Ledger(config.ledger_url), partition_truth(simulator.truth(), [PARTITION]))


def test_below_min_free_bytes_no_download_is_admitted(config, simulator, monkeypatch):
    monkeypatch.setattr(FilesystemBlobStore, "free_bytes", lambda self: config.min_free_bytes - 1)
    runtime = Runtime.from_config(config)
    source, window = config.source_by_key(PARTITION[0]), DayWindow.parse(PARTITION[1])
    discover(runtime, source, window)
    before = media_requests(simulator)
    report = download_partition(runtime, source, window)
    assert media_requests(simulator) == before, "not one media request while the disk is (nearly) full"
    assert report.extra.get("platforms_halted") == 1 and report.ok == 0
    assert set(runtime.ledger.state_counts()) == {"discovered"}, "items handed back untouched, attempts kept"
    assert not list(runtime.store.iter_parts()) and not store_blobs(config.store_root)
    monkeypatch.undo()
    finish_and_check(config, simulator)


def test_enospc_while_writing_a_part_is_disk_full_and_stops_admission(config, simulator, monkeypatch):
    def full_disk(handle, chunk):
        raise cas.storage_error(OSError(errno.ENOSPC, "No space left on device"), "writing the .part")

    monkeypatch.setattr(fetcher, "_write", full_disk)
    crawl(str(config.path), [SPEC])
    tasks = Ledger(config.ledger_url).tasks()
    assert {t.error_class for t in tasks if t.state == "failed"} == {"disk_full"}
    assert sum(t.state == "failed" for t in tasks) <= Runtime.from_config(config).download_threads, \
        "after the first disk_full no new download is admitted"
    assert not store_blobs(config.store_root)
    monkeypatch.undo()
    finish_and_check(config, simulator)


@pytest.mark.parametrize("broken", ["fsync", "link"])
def test_a_failed_fsync_or_link_at_commit_is_a_storage_error_and_no_blob(config, simulator, monkeypatch, broken):
    def failing(*_args, **_kwargs):
        raise OSError(errno.EIO if broken == "fsync" else errno.ENOSPC, f"{broken} failed")

    if broken == "fsync":
        monkeypatch.setattr(cas, "_fsync_file", failing)
    else:
        monkeypatch.setattr(cas.os, "link", failing)
    crawl(str(config.path), [SPEC])
    tasks = Ledger(config.ledger_url).tasks()
    failed = [t for t in tasks if t.state == "failed"]
    assert len(failed) == 1, "the commit stage stops at the first storage failure"
    assert failed[0].error_class == ("storage_error" if broken == "fsync" else "disk_full")
    assert not store_blobs(config.store_root), "nothing reached the store's namespace"
    assert {t.state for t in tasks} <= {"failed", "verified"}
    monkeypatch.undo()
    assert_no_half_written_blob(config)
    finish_and_check(config, simulator)

"""`reconcile`: every kind of store/ledger disagreement is found, and --repair converges without losing bytes."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time

import pytest
from sqlalchemy import update

from media_crawler.cli import main as cli_main
from media_crawler.config import load_config
from media_crawler.pipeline.liveness import lease_owner, process_token
from media_crawler.recovery.reconcile import reconcile
from media_crawler.store.cas import FilesystemBlobStore
from media_crawler.store.ledger import Ledger, T
from media_crawler_tests.recovery.crawl_worker import crawl
from media_crawler_tests.recovery.support import assert_converged, partition_truth, write_recovery_config

PARTITIONS = [("weibo-678", "2026-11-26"), ("facebook-42", "2026-11-25")]
SPECS = [f"{key}|{day}" for key, day in PARTITIONS]
OLD = time.time() - 3600


@pytest.fixture
def crawled(crawl_home, simulator):
    config = load_config(write_recovery_config(crawl_home, simulator))
    crawl(str(config.path), SPECS)
    return config, Ledger(config.ledger_url), FilesystemBlobStore(config.store_root)


def dead_process_token() -> str:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    token = process_token(child.pid)  # read while it runs: the start time is part of the token
    child.wait()
    return token


def set_row(ledger: Ledger, task_id: int, **values) -> None:
    with ledger.engine.begin() as conn:
        conn.execute(update(T).where(T.c.id == task_id).values(**values))


def aged_file(path, data: bytes) -> None:
    path.write_bytes(data)
    os.utime(path, (OLD, OLD))


def test_every_disagreement_is_found_and_repair_converges_to_the_truth(crawled, simulator):
    config, ledger, store = crawled
    rows = ledger.tasks(states=["committed"])
    missing, corrupt, truncated, stranded, leased, resumable, finished = rows[:7]
    store.path_for(missing.sha256).unlink()
    corrupt_path = store.path_for(corrupt.sha256)
    corrupt_bytes = bytes(b ^ 0xFF for b in corrupt_path.read_bytes())
    corrupt_path.write_bytes(corrupt_bytes)  # same size: only a re-hash tells
    truncated_path = store.path_for(truncated.sha256)
    truncated_path.write_bytes(truncated_path.read_bytes()[:-10])
    set_row(ledger, stranded.id, state="verified")  # committed before the ledger heard: blob there, no .part
    set_row(ledger, leased.id, state="downloading", lease_owner=f"{dead_process_token()}:run:nonce",
            lease_expires_at=time.time() + 600)  # not expired: only the dead pid says it is free
    set_row(ledger, resumable.id, state="retry_wait", etag='"v1"')
    aged_file(store.staging_path(f"task-{resumable.id}"), b"half a file")
    aged_file(store.staging_path(f"task-{finished.id}"), b"left behind by a crash after the link")
    aged_file(store.staging_path("task-999999"), b"no row")
    orphan = b"an orphan blob: bytes no row names"
    orphan_path = store.path_for(hashlib.sha256(orphan).hexdigest())
    orphan_path.parent.mkdir(parents=True, exist_ok=True)
    orphan_path.write_bytes(orphan)

    found = reconcile(ledger, store, verify_hashes=True)
    subjects = {(f.kind, f.subject) for f in found.findings}
    assert ("missing_blob", f"t_{missing.id}") in subjects
    assert ("corrupt_blob", str(corrupt_path)) in subjects and ("corrupt_blob", str(truncated_path)) in subjects
    assert ("stranded_row", f"t_{stranded.id}") in subjects
    assert ("resumable_part", str(store.staging_path(f"task-{resumable.id}"))) in subjects
    assert ("stale_part", str(store.staging_path(f"task-{finished.id}"))) in subjects
    assert ("stale_part", str(store.staging_path("task-999999"))) in subjects
    assert ("orphan_blob", orphan_path.name) in subjects
    assert found.counts()["dead_lease"] == 1
    assert ledger.tasks(states=["downloading"]), "without --repair nothing changes"

    repaired = reconcile(ledger, store, repair=True, verify_hashes=True)
    assert repaired.counts() == found.counts()
    quarantined = {path.read_bytes() for path in (config.store_root / "quarantine").iterdir()}
    assert len(quarantined) == 2 and corrupt_bytes in quarantined, "corrupt blobs are kept aside, not deleted"
    assert not corrupt_path.exists() and not truncated_path.exists()
    assert orphan_path.exists(), "orphan blobs are kept"
    assert store.staging_path(f"task-{resumable.id}").exists(), "resumable .part kept"
    assert not store.staging_path(f"task-{finished.id}").exists()
    assert {t.id: t.state for t in ledger.tasks()}[stranded.id] == "committed"
    after = reconcile(ledger, store, verify_hashes=True)
    assert not after.problems, after.problems

    orphan_path.unlink()  # not part of the truth; everything else must come back by itself
    store.staging_path(f"task-{resumable.id}").unlink()  # its made-up validator would fail the resume
    crawl(str(config.path), SPECS)
    assert_converged(config.store_root, ledger, partition_truth(simulator.truth(), PARTITIONS))


def test_reconcile_leaves_live_leases_and_fresh_parts_alone(crawled):
    _config, ledger, store = crawled
    row = ledger.tasks(states=["committed"])[0]
    set_row(ledger, row.id, state="downloading", lease_owner=lease_owner("live"), lease_expires_at=time.time() + 600)
    store.staging_path(f"task-{row.id}").write_bytes(b"being written right now")
    store.staging_path("task-424242").write_bytes(b"fresh")
    report = reconcile(ledger, store, repair=True)
    assert not report.findings
    assert store.staging_path(f"task-{row.id}").exists() and store.staging_path("task-424242").exists()
    assert ledger.tasks(states=["downloading"])


def test_reconcile_command_exit_status_and_json(crawled, capsys):
    config, ledger, store = crawled
    assert cli_main(["reconcile", "--config", str(config.path)]) == 0
    store.path_for(ledger.tasks(states=["committed"])[0].sha256).unlink()
    assert cli_main(["reconcile", "--config", str(config.path), "--json"]) == 1
    document = json.loads(capsys.readouterr().out.split("store and ledger agree\n")[-1])
    assert document["counts"] == {"missing_blob": 1} and not document["repaired"]
    assert cli_main(["reconcile", "--config", str(config.path), "--repair"]) == 0
    assert cli_main(["reconcile", "--config", str(config.path)]) == 0

"""store/staging.py: staging names of committed content are removed, and nothing else is.

The state a kill between the store's link and the unlink of the staging name
leaves (a `.part` that is a second name of a committed blob, its row still
`downloading` with a dead lease) is planted in a real fetch-urls store; so are
the look-alikes that must be kept.
"""
from __future__ import annotations

import hashlib
import os
import shutil

import pytest
from sqlalchemy import update

from media_crawler.cli import main as cli_main
from media_crawler.store.staging import remove_committed_staging
from media_crawler.store.cas import FilesystemBlobStore
from media_crawler.store.database import dispose_engines
from media_crawler.store.ledger import Ledger, T
from media_crawler_tests.recovery.test_fetch_urls_killed_ten_times import FeedServer
from media_crawler_tests.recovery.test_reconcile import dead_process_token


def fetch(server: FeedServer, store, *extra: str) -> int:
    return cli_main(["fetch-urls", "--feed", f"{server.origin}/feed.json", "--store", str(store),
                     "--allow-host", server.origin, "--workers", "4", "--processes", "1", *extra])


@pytest.fixture
def fetched(tmp_path, monkeypatch, capsys):
    """(server, store folder, ledger, FilesystemBlobStore) of a finished fetch-urls run over 10 files."""
    monkeypatch.delenv("MEDIA_CRAWLER_LEDGER_URL", raising=False)
    with FeedServer(files=10, latency_s=0.0) as server:
        store = tmp_path / "store"
        assert fetch(server, store) == 0
        capsys.readouterr()
        yield server, store, Ledger(f"sqlite:///{store / 'ledger.db'}"), FilesystemBlobStore(store)
    dispose_engines()


def set_row(ledger: Ledger, task_id: int, **values) -> None:
    with ledger.engine.begin() as conn:
        conn.execute(update(T).where(T.c.id == task_id).values(**values))


def killed_between_link_and_unlink(ledger: Ledger, store: FilesystemBlobStore, task) -> None:
    """What fetch-urls leaves when killed inside store.commit: the blob linked, the staging
    name not yet dropped, the row's batched transitions never written."""
    os.link(store.path_for(task.sha256), store.staging_path(task.staging_name))
    set_row(ledger, task.id, state="downloading", sha256=None, size=None, committed_at=None,
            lease_owner=f"{dead_process_token()}:run:nonce", lease_expires_at=None)


def all_blobs_whole(store: FilesystemBlobStore) -> bool:
    return all(hashlib.sha256(store.path_for(name).read_bytes()).hexdigest() == name
               and store.path_for(name).stat().st_nlink == 1 for name in store.iter_sha256s())


def test_names_of_committed_content_go_and_everything_else_stays(fetched, tmp_path):
    _server, _root, ledger, store = fetched
    rows = sorted(ledger.tasks(states=["committed"]), key=lambda task: task.id)
    announced = [task for task in rows if task.expected_sha256]
    unannounced = [task for task in rows if not task.expected_sha256]
    linked_hinted, linked_unhinted = announced[0], unannounced[0]
    killed_between_link_and_unlink(ledger, store, linked_hinted)
    killed_between_link_and_unlink(ledger, store, linked_unhinted)  # no hash anywhere: found by hashing
    committed_copy = announced[1]
    shutil.copyfile(store.path_for(committed_copy.sha256), store.staging_path(committed_copy.staging_name))
    resumable = announced[2]
    set_row(ledger, resumable.id, state="retry_wait", sha256=None, etag='"v1"')
    store.staging_path(resumable.staging_name).write_bytes(b"the first half of a download")
    lost = unannounced[1]  # committed, blob gone: its .part may be the only copy left
    shutil.copyfile(store.path_for(lost.sha256), store.staging_path(lost.staging_name))
    store.path_for(lost.sha256).unlink()
    muxed = store.staging_path("mux-7-4242")  # a mux commit killed the same way: no row at all
    os.link(store.path_for(unannounced[2].sha256), muxed)
    outside = tmp_path / "somebody-elses-hard-link"  # a second name, but not of a blob
    outside.write_bytes(b"not in the store")
    os.link(outside, store.staging_path("task-999999"))

    unhinted_part = store.staging_path(linked_unhinted.staging_name)
    assert store.stored_name_of(unhinted_part) == linked_unhinted.sha256
    assert store.stored_name_of(store.staging_path(committed_copy.staging_name)) is None, "one link: nobody's second name"

    removed = {path.name for path in remove_committed_staging(store, ledger)}
    assert removed == {f"{linked_hinted.staging_name}.part", f"{linked_unhinted.staging_name}.part",
                       f"{committed_copy.staging_name}.part", muxed.name}
    left = {path.name for path in store.iter_parts()}
    assert left == {f"{resumable.staging_name}.part", f"{lost.staging_name}.part", "task-999999.part"}
    assert all_blobs_whole(store), "blobs keep their bytes (and are now their content's only name)"
    assert remove_committed_staging(store, ledger) == [], "a second sweep finds nothing"


def test_without_a_ledger_only_second_names_of_blobs_are_recognized(fetched):
    _server, _root, ledger, store = fetched
    first, second = sorted(ledger.tasks(states=["committed"]), key=lambda task: task.id)[:2]
    os.link(store.path_for(first.sha256), store.staging_path(first.staging_name))
    shutil.copyfile(store.path_for(second.sha256), store.staging_path(second.staging_name))
    assert [path.name for path in remove_committed_staging(store)] == [f"{first.staging_name}.part"]
    assert store.staging_path(second.staging_name).exists()


def test_a_store_left_by_a_kill_inside_commit_converges_once_a_run_sweeps(fetched):
    """The sweep is what a restart needs: with it (as the download stage calls it), the next
    fetch-urls run leaves the clean store; without it, the names stay (the issue's 4 leftovers)."""
    server, root, ledger, store = fetched
    before = {name: store.path_for(name).read_bytes() for name in store.iter_sha256s()}
    for task in sorted(ledger.tasks(states=["committed"]), key=lambda task: task.id)[:4]:
        killed_between_link_and_unlink(ledger, store, task)
    remove_committed_staging(store, ledger)  # what the restart's download stage does first
    assert fetch(server, root) == 0
    assert list(store.iter_parts()) == []
    assert {name: store.path_for(name).read_bytes() for name in store.iter_sha256s()} == before
    assert ledger.state_counts() == {"committed": 10}

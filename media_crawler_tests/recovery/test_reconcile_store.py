"""`reconcile --store DIR [--ledger URL]`: a fetch-urls store without a sources file; a check says
"would remove", a repair "removed"."""
from __future__ import annotations

import json
import os
import time

from media_crawler.cli import main as cli_main
from media_crawler.store.cas import FilesystemBlobStore
from media_crawler.store.database import dispose_engines
from media_crawler.store.ledger import Ledger
from media_crawler_tests.recovery.test_fetch_urls_killed_ten_times import FeedServer
from media_crawler_tests.recovery.test_staging_names import all_blobs_whole, fetch, killed_between_link_and_unlink
from media_crawler_tests.recovery.test_staging_names import fetched  # noqa: F401 - a fixture

OLD = time.time() - 3600


def failure_line(capsys) -> dict:
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    assert len(lines) == 1, lines
    return json.loads(lines[0])


def test_check_says_would_remove_and_repair_removes(fetched, capsys):
    _server, root, ledger, store = fetched
    linked = sorted(ledger.tasks(states=["committed"]), key=lambda task: task.id)[0]
    killed_between_link_and_unlink(ledger, store, linked)
    stale = store.staging_path("task-999999")
    stale.write_bytes(b"no row names this")
    os.utime(stale, (OLD, OLD))
    linked_part = store.staging_path(linked.staging_name)

    assert cli_main(["reconcile", "--store", str(root)]) == 1
    out = capsys.readouterr().out
    assert "linked_part: 1 (would remove)" in out and "stale_part: 1 (would remove)" in out, out
    assert "dead_lease: 1 (would release; downloads would be re-queued)" in out, out
    assert "(removed)" not in out and "nothing was changed (run with --repair)" in out
    assert linked_part.exists() and stale.exists()

    assert cli_main(["reconcile", "--store", str(root), "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["dry_run"] is True and not document["repaired"]
    actions = {finding["kind"]: finding["action"] for finding in document["findings"]}
    assert actions["linked_part"] == actions["stale_part"] == "would remove"
    assert linked_part.exists() and stale.exists()

    assert cli_main(["reconcile", "--store", str(root), "--repair"]) == 0
    out = capsys.readouterr().out
    assert "linked_part: 1 (removed)" in out and "stale_part: 1 (removed)" in out and "repaired" in out, out
    assert not linked_part.exists() and not stale.exists()
    assert all_blobs_whole(store)
    assert cli_main(["reconcile", "--store", str(root)]) == 0
    # Nothing left to repair. The re-queued row's blob may read as an orphan (kept) until its
    # download runs again: the test's set-up took the row's sha256 away.
    out = capsys.readouterr().out
    assert "store and ledger agree" in out or "0 problem(s) to repair" in out, out


def test_a_fetch_urls_store_with_its_own_ledger_url(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("MEDIA_CRAWLER_LEDGER_URL", raising=False)
    root, ledger_url = tmp_path / "store", f"sqlite:///{tmp_path / 'elsewhere.db'}"
    try:
        with FeedServer(files=4, latency_s=0.0) as server:
            assert fetch(server, root, "--ledger", ledger_url) == 0
        capsys.readouterr()
        assert cli_main(["reconcile", "--store", str(root)]) == 2
        assert "no ledger at" in failure_line(capsys)["message"]
        assert not (root / "ledger.db").exists(), "a wrong guess must not create an empty ledger"
        assert cli_main(["reconcile", "--store", str(root), "--ledger", ledger_url]) == 0
        assert "checked 4 rows, 4 blobs" in capsys.readouterr().out
        assert Ledger(ledger_url).state_counts() == {"committed": 4} and len(list(FilesystemBlobStore(root).iter_sha256s())) == 4
    finally:
        dispose_engines()


def test_usage_errors_are_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEDIA_CRAWLER_CONFIG", raising=False)
    assert cli_main(["reconcile"]) == 2
    assert "--store DIR for a fetch-urls store" in failure_line(capsys)["message"]
    assert cli_main(["reconcile", "--store", str(tmp_path / "nowhere")]) == 2
    assert "no store folder" in failure_line(capsys)["message"]
    assert cli_main(["reconcile", "--store", str(tmp_path), "--config", "sources.yaml"]) == 2
    assert "not both" in failure_line(capsys)["message"]
    assert cli_main(["reconcile", "--ledger", "sqlite:///x.db"]) == 2
    assert "--ledger goes with --store" in failure_line(capsys)["message"]

"""The SQLite ledger's hot path (discovery, download claims, stage claims, batched moves)
makes no temporary file: a statement journal or a transient index that outgrows memory
goes to a new file in SQLite's temp folder (/var/tmp/etilqs_*), a new inode per
statement on the disk (issue 31's strace: 34 of them for 5,000 items)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

# Run in a process of its own: SQLite reads SQLITE_TMPDIR once, when it starts up.
_WORK = textwrap.dedent("""
    import sys
    from media_crawler.models import Lease, MediaRecord
    from media_crawler.store.ledger import DOWNLOADED, Ledger
    from media_crawler.store.leases import claim_downloads, claim_in_state
    from media_crawler.store.transitions import Committed, Downloaded, Then, Verified

    ledger = Ledger("sqlite:///" + sys.argv[1])
    records = [MediaRecord(platform="urls", item_id=f"{n * 7919 % 100003:06d}-{n}", variant="file", kind="image",
                           canonical_url=f"https://example.org/{n}", media_url=f"https://cdn.example.org/{n}.jpg")
               for n in range(3000)]
    for start in range(0, len(records), 200):
        ledger.record_discovered(records[start:start + 200], source_key="s", day="d")
    for shard in range(2):
        tasks = claim_downloads(ledger, source_key="s", day="d", lease=Lease("w", 60.0, None), limit=512,
                                shard=(shard, 2))
        assert len(tasks) == 512, len(tasks)
        moves = [(task.id, "w", Then(Downloaded(f"{task.id:064x}", 20_000 + task.id, None, 0.0, 1),
                                     Then(Verified(), Committed()))) for task in tasks[:300]]
        moves += [(task.id, "w", Downloaded(f"{task.id:064x}", 20_000 + task.id, None, 0.0, 1)) for task in tasks[300:]]
        assert ledger.apply(moves) == 512
    assert len(claim_in_state(ledger, DOWNLOADED, source_key="s", day="d", owner="v")) == 2 * 212
    if sys.argv[2:] == ["and-a-statement-journal"]:  # the probe's own check: it sees a spilled journal
        with ledger.engine.begin() as conn:
            conn.exec_driver_sql("UPDATE mc_tasks SET state = 'discovered', size = 1")
    print("done")
""")


def _run(tmp_path: Path, *args: str) -> bool:
    """Run the ledger work with SQLite's temp folder in tmp_path; whether anything was made there."""
    temp = tmp_path / "sqlite-temp"
    temp.mkdir()
    before = temp.stat().st_mtime_ns  # a file made (and unlinked at once, as SQLite does) moves it
    env = {**os.environ, "SQLITE_TMPDIR": str(temp), "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", _WORK, str(tmp_path / "ledger.db"), *args], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr
    return temp.stat().st_mtime_ns != before


def test_discovery_claims_and_moves_make_no_sqlite_temp_file(tmp_path):
    assert not _run(tmp_path)


def test_the_probe_sees_a_statement_journal_spilled_to_a_file(tmp_path):
    assert _run(tmp_path, "and-a-statement-journal")

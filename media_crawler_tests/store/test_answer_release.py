"""`compact --answers-older-than`: the kept API answers fetched before the cut-off are
released (their rows, then every answer blob no row names), newer ones kept, a blob a
newer answer shares kept; a compact killed between its two steps converges on the next
run (or on `reconcile --repair`); a crawl writing a row while its blob is released stores
the blob again; on SQLite, PostgreSQL and an S3 answer store."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml
from sqlalchemy import event

from media_crawler.crashpoints import AFTER_ANSWER_BLOB_DELETED, AFTER_ANSWER_ROWS_RELEASED, CRASH_ENV
from media_crawler.pipeline.answers import AnswerKeeper
from media_crawler.platforms.transport import FetchedAnswer
from media_crawler.store.answer_release import release_answers, sweep_unnamed, unnamed_answer_blobs
from media_crawler.store.answers import kept_answers
from media_crawler.store.ledger import Ledger
from media_crawler.store.open_store import open_answer_store
from media_crawler.store.reports.counts import kept_answers as kept_volume

OLD, NEW = 1_000.0, 9_000.0  # fetch times; the cut-off CUT lies between
CUT = 5_000.0
SHARED, ONLY_OLD, ONLY_NEW = b'{"page": "unchanged"}', b'{"page": "since changed"}', b'{"page": "new"}'


def _answer(body: bytes, fetched_at: float, url: str = "http://127.0.0.1:1/feed.json") -> FetchedAnswer:
    return FetchedAnswer(platform="urls", url=url, status=200, reason="OK",
                         headers=(("Content-Type", "application/json"),), body=body, fetched_at=fetched_at,
                         secrets=())


def _keep_three(ledger: Ledger, store) -> AnswerKeeper:
    """Two old answers (one body fetched again since) and a new one."""
    keeper = AnswerKeeper(ledger, store)
    for body, when in ((SHARED, OLD), (ONLY_OLD, OLD), (SHARED, NEW), (ONLY_NEW, NEW)):
        keeper.keep(_answer(body, when))
    return keeper


def _sha(body: bytes) -> str:
    import hashlib

    return hashlib.sha256(body).hexdigest()


def _released_and_kept(ledger: Ledger, store) -> None:
    """The shared claims of every store and ledger: old answers go, newer stay, a shared
    blob stays while named, the volume status and the metrics show goes down."""
    assert kept_volume(ledger.engine) == {"urls": {"answers": 4, "bytes": 2 * len(SHARED) + len(ONLY_OLD)
                                                   + len(ONLY_NEW)}}
    assert set(store.iter_sha256s()) == {_sha(SHARED), _sha(ONLY_OLD), _sha(ONLY_NEW)}

    counted = release_answers(ledger, store, before=CUT, dry_run=True)
    assert (counted.rows, counted.blobs) == (2, 1) and len(list(kept_answers(ledger))) == 4, "a dry run changes nothing"
    done = release_answers(ledger, store, before=CUT)
    assert (done.rows, done.row_bytes, done.blobs) == (2, len(SHARED) + len(ONLY_OLD), 1) == \
        (counted.rows, counted.row_bytes, counted.blobs)
    assert [(a.fetched_at, a.sha256) for a in kept_answers(ledger)] == [(NEW, _sha(SHARED)), (NEW, _sha(ONLY_NEW))]
    assert set(store.iter_sha256s()) == {_sha(SHARED), _sha(ONLY_NEW)}, "the shared blob stays: a newer row names it"
    assert kept_volume(ledger.engine) == {"urls": {"answers": 2, "bytes": len(SHARED) + len(ONLY_NEW)}}
    again = release_answers(ledger, store, before=CUT)
    assert (again.rows, again.blobs) == (0, 0), "idempotent"

    assert release_answers(ledger, store, before=NEW + 1).blobs == 2
    assert list(store.iter_sha256s()) == [] and kept_volume(ledger.engine) == {}


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger(request, tmp_path):
    if request.param == "sqlite":
        yield Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    else:
        yield Ledger(request.getfixturevalue("postgres").create())
    from media_crawler.store.database import dispose_engines

    dispose_engines()


def test_old_answers_are_released_newer_kept_and_a_shared_blob_kept_while_named(ledger, tmp_path):
    store = open_answer_store(tmp_path / "store", create=True)
    _keep_three(ledger, store)
    _released_and_kept(ledger, store)


def test_on_an_s3_answer_store(s3_server, tmp_path, monkeypatch):
    for name, value in s3_server.environment.items():
        monkeypatch.setenv(name, value)
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    store = open_answer_store(s3_server.new_uri(), create=True, local_root=tmp_path / "local")
    assert store.location(_sha(SHARED)).startswith("s3://")
    _keep_three(ledger, store)
    _released_and_kept(ledger, store)
    store.release(_sha(SHARED))  # gone already: no error


def _swept_after_the_first_put(ledger: Ledger, real, swept: list[int]):
    """`real`'s folder as a store whose first put is followed by a sweep (`compact` between
    a keeper's put and its row); `swept` gets what it released."""

    class SweptAfterPut(type(real)):
        def put_stream_if_absent(self, stream, sha256=None):
            stored = super().put_stream_if_absent(stream, sha256)
            if not swept:
                swept.append(sweep_unnamed(ledger, real))
            return stored

    return SweptAfterPut(real.root)


def test_a_blob_released_before_its_row_is_written_is_stored_again(tmp_path):
    """A crawl keeps an answer: the blob is put, then `compact` sweeps it (no row names it
    yet), then the row's transaction sees the sweep's mark: no row, the blob is put again,
    then the row is written."""
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    real = open_answer_store(tmp_path / "store", create=True)
    swept: list[int] = []
    keeper = AnswerKeeper(ledger, _swept_after_the_first_put(ledger, real, swept))
    keeper.keep(_answer(ONLY_NEW, NEW))
    assert swept == [1], "the sweep ran between the put and the row and deleted the blob"
    [row] = list(kept_answers(ledger))
    assert real.exists(row.sha256), "stored again before its row was written"


def test_on_postgresql_a_sweep_waits_for_a_row_being_written(postgres, tmp_path):
    """The sweep does not see a row not yet committed: it waits for its transaction
    (hold_answer_writers), then sees the row and keeps the blob."""
    from media_crawler.store import schema

    ledger = Ledger(postgres.create())
    store = open_answer_store(tmp_path / "store", create=True)
    import io

    sha256 = store.put_stream_if_absent(io.BytesIO(SHARED)).sha256
    done: list[int] = []
    with ledger.engine.begin() as writer:
        writer.execute(schema.api_answers.insert().values(
            platform="urls", url="http://x/", fetched_at=NEW, status=200, reason="OK", headers="[]", sha256=sha256,
            size=len(SHARED)))
        sweeper = threading.Thread(target=lambda: done.append(sweep_unnamed(ledger, store)))
        sweeper.start()
        _wait_for_a_waiting_lock(postgres, ledger)
    sweeper.join()
    assert done == [0] and store.exists(sha256)


class LedgerTransactions:
    """Counts the ledger's transactions open now (SQLAlchemy's begin, commit and rollback
    events on its engine), in every thread."""

    def __init__(self, engine) -> None:
        self.engine = engine
        self.open = 0
        self._hooks = {"begin": lambda conn: self._count(1), "commit": lambda conn: self._count(-1),
                       "rollback": lambda conn: self._count(-1)}

    def _count(self, step: int) -> None:
        self.open += step

    def __enter__(self) -> "LedgerTransactions":
        for name, hook in self._hooks.items():
            event.listen(self.engine, name, hook)
        return self

    def __exit__(self, *exc_info) -> None:
        for name, hook in self._hooks.items():
            event.remove(self.engine, name, hook)


def _calls_watched(store, transactions: LedgerTransactions, calls: list) -> object:
    """`store`, each call of it noted with whether a ledger transaction was open then."""

    class Watched:
        def __getattr__(self, name):
            method = getattr(store, name)

            def called(*args, **kwargs):
                calls.append((name, transactions.open > 0))
                return method(*args, **kwargs)

            return called

    return Watched()


def test_keeping_an_answer_calls_the_store_with_no_ledger_transaction_open(ledger, tmp_path):
    """The row's transaction makes no call to the store (on S3 each is a round trip, and on
    SQLite the transaction holds the database's write lock), even when `compact` released
    the blob between the put and the row: the keeper puts it again outside, then writes the
    row. The watch itself is shown to see a call made inside a transaction."""
    real = open_answer_store(tmp_path / "store", create=True)
    swept: list[int] = []
    calls: list[tuple[str, bool]] = []
    with LedgerTransactions(ledger.engine) as transactions:
        keeper = AnswerKeeper(ledger, _calls_watched(_swept_after_the_first_put(ledger, real, swept), transactions,
                                                     calls))
        keeper.keep(_answer(ONLY_NEW, NEW))  # released by the sweep, stored again
        keeper.keep(_answer(ONLY_NEW, NEW + 1))  # an unchanged page: the blob is there
        keeper.keep(_answer(SHARED, NEW + 2))
        assert swept == [1] and transactions.open == 0
        assert [name for name, _inside in calls].count("put_stream_if_absent") == 3, "one put again after the sweep"
        assert calls and not any(inside for _name, inside in calls), calls

        with ledger.engine.begin():
            _calls_watched(real, transactions, calls).exists(_sha(SHARED))
        assert calls[-1] == ("exists", True), "the watch sees a call made inside a transaction"
    rows = list(kept_answers(ledger))
    assert [row.sha256 for row in rows] == [_sha(ONLY_NEW), _sha(ONLY_NEW), _sha(SHARED)]
    assert all(real.exists(row.sha256) for row in rows)


def _wait_for_a_waiting_lock(postgres, ledger: Ledger) -> None:
    """Until some session waits for a lock on mc_api_answers (the sweep's LOCK TABLE)."""
    import time

    from sqlalchemy import text

    with ledger.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for _ in range(3000):  # a bound on the poll, not an assertion on time
            if conn.execute(text("SELECT count(*) FROM pg_locks WHERE NOT granted AND "
                                 "relation = 'mc_api_answers'::regclass")).scalar():
                return
            time.sleep(0.01)
    raise AssertionError("the sweep never waited for the lock")


# -- the command, killed between its steps ---------------------------------------------------

def _home(tmp_path: Path, store: str | None = None) -> Path:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    config = home / "sources.yaml"
    config.write_text(yaml.safe_dump({"store": store or str(home / "store"),
                                      "ledger_url": f"sqlite:///{home / 'ledger.db'}",
                                      "sources": [{"urls": "http://127.0.0.1:1/feed.json"}]}))
    return config


def _opened(config: Path):
    """(ledger, answer store) of a home's config, as the commands open them."""
    from media_crawler.config import load_config

    loaded = load_config(config)
    return Ledger(loaded.ledger_url), open_answer_store(loaded.store_location, create=True)


def _cli(*args: str, crash_at: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    if crash_at:
        env[CRASH_ENV] = crash_at
    return subprocess.run([sys.executable, "-m", "media_crawler.cli", *args], env=env, capture_output=True,
                          text=True, timeout=300)


def test_a_compact_killed_between_rows_and_blobs_converges(tmp_path, monkeypatch):
    monkeypatch.delenv("MEDIA_CRAWLER_LEDGER_URL", raising=False)
    config = _home(tmp_path)
    ledger, store = _opened(config)
    _keep_three(ledger, store)  # fetched in 1970: every answer is older than a day
    keeper = AnswerKeeper(ledger, store)
    import time

    keeper.keep(_answer(ONLY_NEW, time.time()))  # and one fetched now

    killed = _cli("compact", "--config", str(config), "--answers-older-than", "1d",
                  crash_at=AFTER_ANSWER_ROWS_RELEASED)
    assert killed.returncode == -9, killed.stderr
    assert [a.sha256 for a in kept_answers(ledger)] == [_sha(ONLY_NEW)], "the rows went in the killed run"
    orphans = sorted(unnamed_answer_blobs(ledger, store))
    assert orphans == sorted([_sha(SHARED), _sha(ONLY_OLD)]), "their blobs did not"

    checked = _cli("reconcile", "--config", str(config))
    assert checked.returncode == 1 and checked.stdout.count("orphan_answer: 2 (would remove)") == 1, checked.stdout
    assert sorted(unnamed_answer_blobs(ledger, store)) == orphans, "a check changes nothing"

    rerun = _cli("compact", "--config", str(config), "--answers-older-than", "1d")
    assert rerun.returncode == 0, rerun.stderr
    assert "released 0 kept API answer(s) (0 bytes) and 2 answer blob(s)" in rerun.stdout
    assert list(store.iter_sha256s()) == [_sha(ONLY_NEW)], "what a clean run leaves"
    assert _cli("reconcile", "--config", str(config)).returncode == 0


def test_a_sweep_killed_after_deleting_a_blob_is_finished_by_the_next(tmp_path, monkeypatch, caplog):
    """A compact SIGKILLed after its sweep deleted a blob, before the transaction that says
    so: its pending mark stands, so no answer with those bytes is written meanwhile (it
    would name a missing blob: one line says not kept); `reconcile` reports the mark and
    `--repair` finishes the sweep, after which the answer is kept and its blob is there."""
    monkeypatch.delenv("MEDIA_CRAWLER_LEDGER_URL", raising=False)
    caplog.set_level("INFO", logger="media_crawler.items")
    config = _home(tmp_path)
    ledger, store = _opened(config)
    keeper = AnswerKeeper(ledger, store)
    keeper.keep(_answer(ONLY_OLD, OLD))  # fetched in 1970: older than a day

    killed = _cli("compact", "--config", str(config), "--answers-older-than", "1d",
                  crash_at=AFTER_ANSWER_BLOB_DELETED)
    assert killed.returncode == -9, killed.stderr
    assert list(store.iter_sha256s()) == [] and list(kept_answers(ledger)) == []
    keeper.keep(_answer(ONLY_OLD, NEW))
    assert list(kept_answers(ledger)) == [], "no row for a blob a killed sweep may have deleted"
    assert any("answer_not_kept" in str(record.__dict__) and "storage_error" in str(record.__dict__)
               for record in caplog.records)

    checked = _cli("reconcile", "--config", str(config))
    assert checked.returncode == 1 and "pending_answer_release: 1 (would release)" in checked.stdout, checked.stdout
    repaired = _cli("reconcile", "--config", str(config), "--repair")
    assert repaired.returncode == 0 and "pending_answer_release: 1 (released)" in repaired.stdout, repaired.stdout
    keeper.keep(_answer(ONLY_OLD, NEW))
    [row] = list(kept_answers(ledger))
    assert row.sha256 == _sha(ONLY_OLD) and store.exists(row.sha256)
    assert _cli("reconcile", "--config", str(config)).returncode == 0


def test_reconcile_repair_removes_orphan_answer_blobs(tmp_path, monkeypatch):
    monkeypatch.delenv("MEDIA_CRAWLER_LEDGER_URL", raising=False)
    config = _home(tmp_path)
    ledger, store = _opened(config)
    import io

    orphan = store.put_stream_if_absent(io.BytesIO(ONLY_OLD)).sha256  # a crawl killed before the row
    AnswerKeeper(ledger, store).keep(_answer(ONLY_NEW, NEW))
    repaired = _cli("reconcile", "--config", str(config), "--repair")
    assert repaired.returncode == 0 and "orphan_answer: 1 (removed)" in repaired.stdout, repaired.stdout
    assert list(store.iter_sha256s()) == [_sha(ONLY_NEW)] and orphan != _sha(ONLY_NEW)


def test_only_the_answer_release_deletes_blobs():
    """`release` (ReleasableBlobs) is called from store/answer_release.py alone: media blobs
    are never deleted (store/blob_store.py says why)."""
    package = Path(__file__).resolve().parents[2] / "media_crawler"
    callers = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "release":
                callers.add(path.relative_to(package).as_posix())
    assert callers == {"store/answer_release.py"}


def test_a_bad_span_is_one_classified_line(tmp_path, monkeypatch, capsys):
    from media_crawler.cli import main

    monkeypatch.delenv("MEDIA_CRAWLER_LEDGER_URL", raising=False)
    config = _home(tmp_path)
    assert main(["compact", "--config", str(config), "--answers-older-than", "ninety days"]) == 2
    err = capsys.readouterr().err
    assert "not a span: 'ninety days'" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1

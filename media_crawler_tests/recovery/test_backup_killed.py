"""A backup to a folder SIGKILLed at each step of its publish order (backup.py `publish_backup`,
crash points `after_backup_*`): the folder's manifest and ledger never name a blob or file the
folder lacks, a restore from it gives a consistent home (or refuses in one line), and running
the backup again leaves what a clean backup leaves."""
from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from dagster import DagsterInstance
from dagster._core.test_utils import create_run_for_test
from sqlalchemy import create_engine, insert, select

from media_crawler.cli import main as cli_main
from media_crawler.crashpoints import (
    AFTER_BACKUP_BLOB, AFTER_BACKUP_FILE, AFTER_BACKUP_MANIFEST, AFTER_BACKUP_SNAPSHOTS, CRASH_ENV,
)
from media_crawler.dagster_home import INSTANCE_TEMPLATE
from media_crawler.recovery.backup import BackupManifest, backup_files
from media_crawler.store import schema
from media_crawler.store.cas import FilesystemBlobStore
from media_crawler.store.database import dispose_engines
from media_crawler.store.ledger import Ledger
from media_crawler_tests.recovery.support import store_blobs


@pytest.fixture
def crawl(tmp_path, monkeypatch):
    """sources.yaml, a ledger with committed rows and their blobs, a Dagster instance with a run."""
    monkeypatch.delenv("MEDIA_CRAWLER_LEDGER_URL", raising=False)
    monkeypatch.delenv(CRASH_ENV, raising=False)
    monkeypatch.setenv("MEDIA_CRAWLER_HOME", str(tmp_path / "var"))
    home = tmp_path / "original"
    (home / "dagster_home").mkdir(parents=True)
    (home / "dagster_home" / "dagster.yaml").write_bytes(INSTANCE_TEMPLATE.read_bytes())
    config = home / "sources.yaml"
    config.write_text(yaml.safe_dump({"store": str(home / "store"), "ledger_url": f"sqlite:///{home / 'ledger.db'}",
                                      "sources": [{"urls": "http://127.0.0.1:1/feed.json"}]}))
    Ledger(f"sqlite:///{home / 'ledger.db'}")
    FilesystemBlobStore(home / "store").ensure()
    commit(home, ["one", "two"])
    add_run(home)
    yield home
    dispose_engines()


def commit(home: Path, items: list[str]) -> None:
    """Blobs linked into the store, then their rows committed (the crawl's order)."""
    store = FilesystemBlobStore(home / "store")
    with engine_at(home / "ledger.db") as engine, engine.begin() as conn:
        for item in items:
            sha256 = store.put_stream_if_absent(io.BytesIO(f"media {item}".encode())).sha256
            conn.execute(insert(schema.tasks).values(
                platform="urls", item_id=item, variant="file", kind="image", source_key="urls-x", day="2026-11-27",
                canonical_url=f"http://example.org/{item}", media_url=f"http://example.org/{item}.jpg",
                state="committed", attempts=1, sha256=sha256, updated_at=1.0))


@contextmanager
def engine_at(ledger_file: Path):
    engine = create_engine(f"sqlite:///{ledger_file}")
    try:
        yield engine
    finally:
        engine.dispose()


def add_run(home: Path) -> None:
    with DagsterInstance.from_config(str(home / "dagster_home")) as instance:
        create_run_for_test(instance, job_name="crawl")


def run_backup(home: Path, folder: Path, crash_at: str | None = None) -> subprocess.CompletedProcess | int:
    args = ["backup", "--to", str(folder), "--config", str(home / "sources.yaml"),
            "--dagster-home", str(home / "dagster_home")]
    if crash_at is None:
        return cli_main(args)
    env = {**os.environ, CRASH_ENV: crash_at}
    return subprocess.run([sys.executable, "-m", "media_crawler.cli", *args], env=env, capture_output=True,
                          text=True, timeout=300)


def committed_blobs(ledger_file: Path) -> set[str]:
    with engine_at(ledger_file) as engine, engine.connect() as conn:
        return set(conn.execute(select(schema.tasks.c.sha256).where(schema.tasks.c.state == "committed")).scalars())


def assert_consistent(folder: Path) -> BackupManifest | None:
    """What the folder shows now: its manifest names files that are all there (no others of
    an older backup mixed in) and a ledger whose blobs are all there, whole."""
    if not (folder / "manifest.json").exists():
        return None
    manifest = BackupManifest.read(folder)
    files = folder / manifest.files
    assert manifest.files and all((files / name).is_file() for name in backup_files(manifest))
    dagster = {path.relative_to(files / "dagster_home").as_posix()
               for path in (files / "dagster_home").rglob("*") if path.is_file()}
    assert dagster == set(manifest.dagster_files), "Dagster files of one backup only"
    blobs = store_blobs(folder / "store")
    for sha256 in committed_blobs(files / "ledger.db"):
        assert hashlib.sha256(blobs[sha256].read_bytes()).hexdigest() == sha256
    return manifest


def layout_of(folder: Path) -> dict:
    """A backup folder's contents, the generation's name and the timestamps left out."""
    manifest = json.loads((folder / "manifest.json").read_text())
    generation = manifest.pop("files")
    for name in ("started_at", "finished_at", "blobs"):
        manifest.pop(name)
    return {"manifest": manifest, "top": sorted(path.name for path in folder.iterdir() if path.name != generation),
            "files": sorted(path.relative_to(folder / generation).as_posix()
                            for path in (folder / generation).rglob("*")),
            "blobs": sorted(store_blobs(folder / "store")),
            "committed": committed_blobs(folder / generation / "ledger.db")}


@pytest.mark.parametrize("crash_at", [
    AFTER_BACKUP_SNAPSHOTS, f"{AFTER_BACKUP_BLOB}:1", f"{AFTER_BACKUP_FILE}:1", f"{AFTER_BACKUP_FILE}:3",
    AFTER_BACKUP_MANIFEST,
])
def test_a_folder_backup_killed_at_each_step_stays_restorable_and_converges_when_run_again(
        crawl, tmp_path, crash_at, capsys):
    folder = tmp_path / "backup"
    assert run_backup(crawl, folder) == 0
    before = assert_consistent(folder)
    commit(crawl, ["three", "four"])  # two new blobs and rows, a new run: the next backup differs
    add_run(crawl)

    killed = run_backup(crawl, folder, crash_at)
    assert killed.returncode == -9, killed.stderr
    shown = assert_consistent(folder)
    new = crash_at == AFTER_BACKUP_MANIFEST
    assert (shown.started_at != before.started_at) is new, "the manifest switches at its rename, not before"

    restored = tmp_path / "restored"
    capsys.readouterr()
    assert cli_main(["restore", "--from", str(folder), "--home", str(restored)]) == 0, capsys.readouterr().err
    committed = committed_blobs(restored / "ledger.db")
    assert committed == committed_blobs(folder / shown.files / "ledger.db"), "no committed row lost its blob"
    blobs = store_blobs(restored / "store")
    for sha256 in committed:
        assert hashlib.sha256(blobs[sha256].read_bytes()).hexdigest() == sha256

    assert run_backup(crawl, folder) == 0
    assert run_backup(crawl, tmp_path / "clean") == 0
    assert layout_of(folder) == layout_of(tmp_path / "clean")
    assert len(layout_of(folder)["committed"]) == 4


def test_a_first_backup_killed_before_its_manifest_is_refused_in_one_line(crawl, tmp_path, capsys):
    folder = tmp_path / "backup"
    assert run_backup(crawl, folder, f"{AFTER_BACKUP_FILE}:1").returncode == -9
    assert not (folder / "manifest.json").exists()
    capsys.readouterr()
    assert cli_main(["restore", "--from", str(folder), "--home", str(tmp_path / "restored")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "not a media-crawler backup" in json.loads(lines[0])["message"], lines
    assert not (tmp_path / "restored").exists()


def test_a_manifest_naming_files_the_folder_lacks_or_outside_it_is_refused_in_one_line(crawl, tmp_path, capsys):
    folder = tmp_path / "backup"
    assert run_backup(crawl, folder) == 0
    manifest = json.loads((folder / "manifest.json").read_text())
    for files, says in ((manifest["files"] + "0", "is incomplete"), ("../original", "is not a folder of this backup")):
        (folder / "manifest.json").write_text(json.dumps({**manifest, "files": files}))
        capsys.readouterr()
        assert cli_main(["restore", "--from", str(folder), "--home", str(tmp_path / "restored")]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and says in json.loads(lines[0])["message"], lines
        assert not (tmp_path / "restored").exists()


def test_a_format_2_folder_is_refreshed_into_a_generation_and_its_old_files_removed(crawl, tmp_path):
    folder = tmp_path / "backup"
    assert run_backup(crawl, folder) == 0
    manifest = json.loads((folder / "manifest.json").read_text())
    for path in (folder / manifest.pop("files")).iterdir():  # as format 2 laid it out
        path.rename(folder / path.name)
    (folder / "manifest.json").write_text(json.dumps({**manifest, "format": 2}))
    assert run_backup(crawl, folder) == 0
    assert layout_of(folder)["top"] == ["manifest.json", "store"]


def test_a_bucket_backup_killed_amid_dagster_files_restores_the_mix_and_converges(crawl, s3_server, tmp_path,
                                                                                 monkeypatch, capsys):
    """A bucket has no rename: the new ledger and part of the new Dagster files beside the older
    ones, under the older manifest (recovery/bucket.py says why that mix is harmless)."""
    for name, value in s3_server.environment.items():
        monkeypatch.setenv(name, value)
    target = s3_server.new_uri("crawl-backups")
    assert run_backup(crawl, target) == 0
    commit(crawl, ["three", "four"])
    add_run(crawl)
    killed = run_backup(crawl, target, f"{AFTER_BACKUP_FILE}:3")  # the ledger and two Dagster files
    assert killed.returncode == -9, killed.stderr

    capsys.readouterr()
    restored = tmp_path / "restored"
    assert cli_main(["restore", "--from", target, "--home", str(restored)]) == 0, capsys.readouterr().err
    committed = committed_blobs(restored / "ledger.db")
    assert len(committed) == 4, "the new ledger, its blobs copied before it"
    blobs = store_blobs(restored / "store")
    for sha256 in committed:
        assert hashlib.sha256(blobs[sha256].read_bytes()).hexdigest() == sha256
    with DagsterInstance.from_config(str(restored / "dagster_home")) as instance:
        assert len(instance.get_runs()) >= 1  # the mix opens

    clean = s3_server.new_uri("crawl-backups")
    assert run_backup(crawl, target) == 0 and run_backup(crawl, clean) == 0

    def keys(uri):
        prefix = uri.split("/", 3)[3]
        return sorted(key[len(prefix):] for key in s3_server.keys(uri))

    assert keys(target) == keys(clean)

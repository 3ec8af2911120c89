"""A restore that can be trusted: the manifest says which versions wrote the backup and which
credential variables the crawl reads (names, never values); restore refuses a backup newer than
the code, reports missing credentials and keeps dispatch paused until they are set, and prints
the measured recovery times."""
from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from contextlib import closing
from importlib.metadata import version

import dagster
import pytest
import yaml
from dagster import DagsterInstance

from media_crawler.cli import main as cli_main
from media_crawler.config import ConfigError, load_config
from media_crawler.recovery.backup import FORMAT, adapter_credentials, backup, credential_records, required_credentials
from media_crawler.recovery.dispatch import instigator_running
from media_crawler.recovery.restore import BackupTooNew, first_successful_partition, restore
from media_crawler.scrub import DEFAULT_CREDENTIAL_ENVS
from media_crawler.store.cas import FilesystemBlobStore
from media_crawler.store.database import dispose_engines
from media_crawler.store.ledger import Ledger
from media_crawler.store.schema import SCHEMA_VERSION

FB_SECRET = "fb-secret-VALUE-never-in-a-manifest"
WEIBO_SECRET = "SUB=weibo-secret-VALUE; SUBP=more-secret-VALUE"


@pytest.fixture
def small_crawl(tmp_path, monkeypatch):
    """A crawl's sources.yaml, ledger and store (one blob), no Dagster instance; facebook's token
    in a variable sources.yaml names, weibo's cookie in the adapter's default, bilibili's unset."""
    monkeypatch.delenv("MEDIA_CRAWLER_LEDGER_URL", raising=False)
    monkeypatch.setenv("MEDIA_CRAWLER_HOME", str(tmp_path / "var"))
    monkeypatch.setenv("MC_TEST_FB_TOKEN", FB_SECRET)
    monkeypatch.setenv("WEIBO_COOKIE", WEIBO_SECRET)
    monkeypatch.delenv("BILIBILI_SESSDATA", raising=False)
    monkeypatch.delenv("FB_ACCESS_TOKEN", raising=False)
    home = tmp_path / "original"
    home.mkdir()
    path = home / "sources.yaml"
    path.write_text(yaml.safe_dump({
        "store": str(home / "store"), "ledger_url": f"sqlite:///{home / 'ledger.db'}",
        "platforms": {"facebook": {"credential_env": {"access_token": "MC_TEST_FB_TOKEN"}}},
        "sources": [{"facebook": "page 42"}, {"weibo": "user 678"}, {"bilibili": "user 12345"}],
    }))
    config = load_config(path)
    Ledger(config.ledger_url)
    store = FilesystemBlobStore(config.store_root).ensure()
    data = b"one blob"
    blob = store.path_for(hashlib.sha256(data).hexdigest())
    blob.parent.mkdir(parents=True)
    blob.write_bytes(data)
    yield config
    dispose_engines()


def edit_manifest(folder, **values) -> None:
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest.update(values)
    path.write_text(json.dumps(manifest))


def failure_line(capsys) -> dict:
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    assert len(lines) == 1, lines
    return json.loads(lines[0])


def test_the_manifest_records_versions_and_credential_names_never_values(small_crawl, tmp_path):
    manifest = backup(small_crawl, None, tmp_path / "backup")
    assert manifest.format == FORMAT == 3 and (tmp_path / "backup" / manifest.files / "ledger.db").is_file()
    assert manifest.ledger_schema_version == SCHEMA_VERSION
    assert manifest.media_crawler_version == version("media-crawler")
    assert manifest.dagster_version == dagster.__version__
    by_name = {record["env"]: record for record in manifest.credentials}
    # sources.yaml's own name replaces facebook's default; the other adapters read their defaults.
    assert set(by_name) == {"MC_TEST_FB_TOKEN", "WEIBO_COOKIE", "BILIBILI_SESSDATA"}
    assert by_name["MC_TEST_FB_TOKEN"] == {"env": "MC_TEST_FB_TOKEN", "platforms": ["facebook"], "needed": True,
                                           "named_in_config": True, "set_when_backed_up": True}
    assert by_name["BILIBILI_SESSDATA"]["set_when_backed_up"] is False
    # Bilibili crawled without SESSDATA before the backup: the restored crawl does not need it either.
    assert required_credentials(manifest.credentials) == ["MC_TEST_FB_TOKEN", "WEIBO_COOKIE"]
    text = (tmp_path / "backup" / "manifest.json").read_text()
    for secret in (FB_SECRET, WEIBO_SECRET, "weibo-secret-VALUE", "more-secret-VALUE"):
        assert secret not in text
    assert json.loads(text)["credentials"] == manifest.credentials


def test_credentials_of_platforms_without_sources_are_recorded_but_not_needed(small_crawl):
    from dataclasses import replace

    config = replace(small_crawl, sources=tuple(s for s in small_crawl.sources if s.platform == "bilibili"))
    records = {record["env"]: record for record in credential_records(config, environ={"WEIBO_COOKIE": "x"})}
    assert records["WEIBO_COOKIE"]["needed"] is False and records["BILIBILI_SESSDATA"]["needed"] is True
    assert required_credentials(list(records.values())) == []
    assert {env for _key, env in adapter_credentials().values()} == set(DEFAULT_CREDENTIAL_ENVS)


def test_restore_refuses_a_ledger_schema_newer_than_the_code(small_crawl, tmp_path, capsys):
    folder = tmp_path / "backup"
    files = backup(small_crawl, None, folder).files
    with closing(sqlite3.connect(folder / files / "ledger.db")) as conn, conn:
        conn.execute("INSERT INTO mc_schema_version (version, applied_at) VALUES (?, ?)",
                     (SCHEMA_VERSION + 1, time.time()))
    # The snapshot is the authority, whatever the manifest says.
    assert cli_main(["restore", "--from", str(folder), "--home", str(tmp_path / "restored")]) == 2
    line = failure_line(capsys)
    assert line["error_class"] == "config_error"
    assert f"its ledger is at schema version {SCHEMA_VERSION + 1}" in line["message"]
    assert f"reads up to version {SCHEMA_VERSION}" in line["message"]
    assert "Restore it with a media-crawler that reads ledger schema version" in line["message"]
    assert not (tmp_path / "restored").exists(), "nothing is copied"


def test_restore_refuses_newer_project_and_dagster_versions_naming_the_versions_needed(small_crawl, tmp_path):
    folder = tmp_path / "backup"
    backup(small_crawl, None, folder)
    edit_manifest(folder, media_crawler_version="99.1.0", dagster_version="99.2.0")
    with pytest.raises(BackupTooNew) as refused:
        restore(folder, tmp_path / "restored")
    assert isinstance(refused.value, ConfigError)
    message = str(refused.value)
    assert "written by media-crawler 99.1.0" in message and "dagster 99.2.0" in message
    assert "Restore it with media-crawler>=99.1.0 and dagster>=99.2.0" in message
    assert "\n" not in message
    edit_manifest(folder, format=FORMAT + 1, media_crawler_version=None, dagster_version=None)
    with pytest.raises(BackupTooNew, match=f"manifest is format {FORMAT + 1}"):
        restore(folder, tmp_path / "restored")
    assert not (tmp_path / "restored").exists()


def test_older_and_format_1_backups_restore(small_crawl, tmp_path):
    folder = tmp_path / "backup"
    backup(small_crawl, None, folder)
    edit_manifest(folder, media_crawler_version="0.0.1", dagster_version="1.0.0")
    summary = restore(folder, tmp_path / "restored")
    assert summary.versions["backup"]["media_crawler"] == "0.0.1" and summary.blobs == 1
    manifest = json.loads((folder / "manifest.json").read_text())
    for name in ("ledger_schema_version", "media_crawler_version", "dagster_version", "credentials"):
        manifest.pop(name)
    for path in (folder / manifest.pop("files")).iterdir():  # formats 1 and 2: the files beside the manifest
        path.rename(folder / path.name)
    (folder / "manifest.json").write_text(json.dumps({**manifest, "format": 1}))
    summary = restore(folder, tmp_path / "restored-1")
    assert summary.versions["backup"]["ledger_schema"] == SCHEMA_VERSION, "read from the snapshot itself"
    assert summary.credentials_required == []


def test_missing_credentials_are_reported_and_keep_dispatch_paused_until_set(small_crawl, tmp_path, monkeypatch,
                                                                            capsys):
    folder, home = tmp_path / "backup", tmp_path / "restored"
    backup(small_crawl, None, folder)
    monkeypatch.delenv("MC_TEST_FB_TOKEN")  # the new machine's environment lacks one
    assert cli_main(["restore", "--from", str(folder), "--home", str(home)]) == 0
    err = capsys.readouterr().err
    assert "credentials MISSING in this environment: MC_TEST_FB_TOKEN; present: WEIBO_COOKIE" in err, err
    assert FB_SECRET not in err and "weibo-secret-VALUE" not in err
    recorded = json.loads((home / "restore.json").read_text())
    assert recorded["credentials_missing"] == ["MC_TEST_FB_TOKEN"]
    assert recorded["credentials_required"] == ["MC_TEST_FB_TOKEN", "WEIBO_COOKIE"]
    # The measured times, printed for the restore record and kept in restore.json.
    times = next(line for line in err.splitlines() if line.startswith("recovery times:"))
    assert "copy " in times and "reconcile " in times and "first successful partition: none yet" in times
    assert recorded["copy_s"] >= 0 and recorded["reconcile_s"] >= 0 and recorded["first_successful_partition"] is None
    assert "ledger schema version" in err and f"dagster {dagster.__version__}" in err

    assert cli_main(["restore", "--resume", "--home", str(home)]) == 2
    line = failure_line(capsys)
    assert line["error_class"] == "config_error" and "MC_TEST_FB_TOKEN" in line["message"]
    assert "dispatch stays paused" in line["message"] and "WEIBO_COOKIE" not in line["message"]
    with DagsterInstance.from_config(str(home / "dagster_home")) as instance:
        assert not any(instigator_running(instance).values()), "still paused"

    monkeypatch.setenv("MC_TEST_FB_TOKEN", "a-new-token-for-the-new-machine")
    assert cli_main(["restore", "--resume", "--home", str(home)]) == 0
    err = capsys.readouterr().err
    assert "resumed:" in err and "recovery times:" in err
    paused = json.loads((home / "paused.json").read_text())
    with DagsterInstance.from_config(str(home / "dagster_home")) as instance:
        running = {name for name, on in instigator_running(instance).items() if on}
    assert running == set(paused["sensors"]) | set(paused["schedules"])


def test_allow_missing_resumes_without_a_credential_the_crawl_no_longer_needs(small_crawl, tmp_path, monkeypatch,
                                                                             capsys):
    folder, home = tmp_path / "backup", tmp_path / "restored"
    backup(small_crawl, None, folder)
    monkeypatch.delenv("WEIBO_COOKIE")
    restore(folder, home)
    assert cli_main(["restore", "--resume", "--home", str(home), "--allow-missing", "WEIBO_COOKIE"]) == 0
    assert cli_main(["restore", "--times", "--home", str(home)]) == 0
    assert "recovery times: copy" in capsys.readouterr().err


def test_first_successful_partition_is_the_first_run_to_succeed_after_the_restore_began(tmp_path):
    from dagster import DagsterRunStatus
    from dagster._core.events import DagsterEvent, DagsterEventType
    from dagster._core.test_utils import create_run_for_test, instance_for_test

    with instance_for_test(temp_dir=str(tmp_path)) as instance:
        before = create_run_for_test(instance, job_name="crawl", tags={"dagster/partition": "2026-11-25|a"})
        succeed(instance, before, DagsterEvent, DagsterEventType)
        began = time.time()
        assert first_successful_partition(instance, began) is None, "a run from before the restore does not count"
        time.sleep(0.01)
        after = create_run_for_test(instance, job_name="crawl", tags={"dagster/partition": "2026-11-26|b"})
        succeed(instance, after, DagsterEvent, DagsterEventType)
        first = first_successful_partition(instance, began)
        assert instance.get_run_by_id(after.run_id).status == DagsterRunStatus.SUCCESS
    assert first["run_id"] == after.run_id and first["partition"] == "2026-11-26|b"
    # The field is what it says (how long after the restore began the run ended), not a bound:
    # how long a real restore takes to its first success is measured by `restore --times`.
    assert first["after_restore_began_s"] == round(first["ended_at"] - began, 3) >= 0


def succeed(instance, run, DagsterEvent, DagsterEventType) -> None:  # noqa: N803 - the classes, passed in
    for event_type in (DagsterEventType.PIPELINE_START, DagsterEventType.PIPELINE_SUCCESS):
        instance.report_dagster_event(DagsterEvent(event_type.value, run.job_name), run_id=run.run_id)


def test_restore_refuses_a_home_that_is_not_empty_in_one_line_and_touches_nothing(small_crawl, tmp_path, capsys):
    folder, home = tmp_path / "backup", tmp_path / "taken"
    backup(small_crawl, None, folder)
    home.mkdir()
    (home / "notes.txt").write_text("someone's files")
    assert cli_main(["restore", "--from", str(folder), "--home", str(home)]) == 2
    line = failure_line(capsys)
    assert line["error_class"] == "config_error" and "is not empty" in line["message"]
    assert [path.name for path in home.iterdir()] == ["notes.txt"]
    assert (home / "notes.txt").read_text() == "someone's files"


def test_restore_fails_the_runs_in_flight_at_backup_time_and_leaves_finished_ones(small_crawl, tmp_path):
    from dagster import DagsterRunStatus
    from dagster._core.test_utils import create_run_for_test

    from media_crawler_tests.recovery.test_restore_drill import dagster_home_at

    original = dagster_home_at(tmp_path / "dagster_home")
    with DagsterInstance.from_config(str(original)) as instance:
        in_flight = create_run_for_test(instance, job_name="crawl", status=DagsterRunStatus.STARTED,
                                        tags={"dagster/partition": "2026-11-25|a"})
        finished = create_run_for_test(instance, job_name="crawl", status=DagsterRunStatus.SUCCESS)
    folder = tmp_path / "backup"
    backup(small_crawl, original, folder)
    summary = restore(folder, tmp_path / "restored")

    assert summary.pause["runs_failed"] == [in_flight.run_id]
    with DagsterInstance.from_config(summary.dagster_home) as restored:
        assert restored.get_run_by_id(in_flight.run_id).status == DagsterRunStatus.FAILURE
        assert restored.get_run_by_id(finished.run_id).status == DagsterRunStatus.SUCCESS
        failure = restored.all_logs(in_flight.run_id)[-1]
        assert "in flight when the backup was taken" in failure.message
    with DagsterInstance.from_config(str(original)) as instance:  # the original is left as it was
        assert instance.get_run_by_id(in_flight.run_id).status == DagsterRunStatus.STARTED

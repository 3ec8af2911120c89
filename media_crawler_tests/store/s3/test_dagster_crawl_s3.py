"""A Dagster crawl of the simulator into `store: s3://...` against SeaweedFS: killed five
times at five crash points, then `rerun-failed`, the bucket holds exactly the
simulator's truth, each object hashing to its key, no blob on local disk; a crawl after
it makes no media request and changes no object."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys

import yaml

from media_crawler.cli import main as cli_main
from media_crawler.commands.crawl import crawl
from media_crawler.commands.rerun_failed import rerun
from media_crawler.config import load_config
from media_crawler.crashpoints import (
    AFTER_COMMIT_LEDGER, AFTER_DOWNLOAD_LEDGER, AFTER_LINK_BEFORE_LEDGER, AFTER_PART_WRITE, AFTER_VERIFY, CRASH_ENV,
)
from media_crawler.store.ledger import Ledger
from media_crawler_tests.recovery.support import media_requests, partition_truth, write_recovery_config
from media_crawler_tests.recovery.test_killed_dagster_run import crawl_command, dagster_home  # noqa: F401 (fixture)

DAY, SOURCE = "2026-11-26", "weibo-678"
KILLS = [f"{AFTER_PART_WRITE}:2", f"{AFTER_DOWNLOAD_LEDGER}:1", f"{AFTER_VERIFY}:1",
         f"{AFTER_LINK_BEFORE_LEDGER}:2", f"{AFTER_COMMIT_LEDGER}:1"]


def bucket_objects(server, uri: str) -> dict[str, int]:
    from media_crawler.store.s3.settings import parse_uri

    parsed = parse_uri(uri)
    return dict(server.client().list_keys(parsed.bucket, parsed.prefix + "/"))


def media_objects(server, uri: str) -> dict[str, int]:
    """The bucket's objects less the API answers kept for the archive, a store of their own
    under answers/ (docs/EXPORT.md)."""
    return {key: size for key, size in bucket_objects(server, uri).items() if "/answers/" not in key}


def test_a_crawl_into_a_bucket_killed_five_times_converges(crawl_home, simulator, dagster_home, s3_server,  # noqa: F811
                                                           monkeypatch, capsys):
    for name, value in s3_server.environment.items():
        monkeypatch.setenv(name, value)
    uri = s3_server.new_uri()
    path = write_recovery_config(crawl_home, simulator)
    data = yaml.safe_load(path.read_text())
    data["store"] = uri
    path.write_text(yaml.safe_dump(data))
    config = load_config(path)
    assert config.store_url == uri

    killed = 0
    for spec in KILLS:
        child = subprocess.run(crawl_command(path, DAY, SOURCE), capture_output=True, timeout=300,
                               env={**os.environ, CRASH_ENV: spec})
        killed += child.returncode == -signal.SIGKILL
        assert child.returncode in (0, -signal.SIGKILL), child.stderr[-2000:]
    assert killed >= 3, "the kills landed"
    assert rerun(str(path), instance=dagster_home) == 0

    expected = partition_truth(simulator.truth(), [(SOURCE, DAY)])
    objects = media_objects(s3_server, uri)
    assert len(objects) < len(bucket_objects(s3_server, uri)), "the answers are kept in the bucket too"
    names = {key.rsplit("/", 1)[1] for key in objects}
    assert names == expected and all("/sha256/" in key for key in objects)
    bucket = uri[len("s3://"):].split("/", 1)[0]
    for key in objects:
        assert hashlib.sha256(s3_server.client().get_object(bucket, key).content).hexdigest() == key.rsplit("/", 1)[1]
    assert not (config.store_root / "sha256").exists(), "no blob on local disk"
    assert not list((config.store_root / "staging").glob("*.part")), "no staged file left"
    ledger = Ledger(config.ledger_url)
    assert set(ledger.state_counts()) <= {"committed"}
    assert {t.sha256 for t in ledger.tasks(states=["committed"])} == expected
    assert list(s3_server.client().list_multipart(bucket, uri.split("/", 3)[3] + "/")) == []

    before = media_requests(simulator)
    outcome = crawl(path, [DAY], [SOURCE], instance=dagster_home)
    assert not outcome.failed
    assert media_requests(simulator) == before, "a crawl after it makes no media request"
    assert media_objects(s3_server, uri) == objects

    # export names each blob by its object; status says its disk line is the staging disk.
    capsys.readouterr()
    assert cli_main(["export", "--config", str(path)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {row["path"] for row in rows} == {f"s3://{bucket}/{key}" for key in objects}
    assert cli_main(["status", "--config", str(path), "--json", "--no-dagster"]) == 0
    disk = json.loads(capsys.readouterr().out)["disk"]
    assert disk["store"] == uri and disk["path"] == str(config.store_root)


def test_a_crawl_into_a_bucket_with_a_wrong_secret_stops_in_one_line_before_any_run(
        crawl_home, simulator, s3_server, dagster_home, monkeypatch, capsys):  # noqa: F811
    for name, value in s3_server.environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-for-the-crawl")
    path = write_recovery_config(crawl_home, simulator)
    data = yaml.safe_load(path.read_text())
    data["store"] = s3_server.new_uri()
    path.write_text(yaml.safe_dump(data))
    before = media_requests(simulator)
    capsys.readouterr()
    assert cli_main(["crawl", "--config", str(path), "--day", DAY, "--source", SOURCE]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    failed = [json.loads(line) for line in err if '"command_failed"' in line]
    assert len(failed) == 1 and failed[0]["error_class"] == "auth", err[-3:]
    assert "wrong-secret-for-the-crawl" not in "".join(err)
    assert media_requests(simulator) == before
    assert list(dagster_home.get_runs()) == [], "no run was started"

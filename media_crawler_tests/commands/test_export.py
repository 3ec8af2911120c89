"""`media-crawler export`: the manifest lists every committed blob with its metadata."""
import hashlib
import json

import pytest
import requests
from dagster import DagsterInstance

from media_crawler.cli import main
from media_crawler.commands.crawl import crawl
from media_crawler_tests.conftest import write_config


def test_export_lists_committed_blobs_with_metadata(crawl_home, simulator, capsys):
    path = write_config(crawl_home, simulator, [{"bilibili": "user 12345"}, {"urls": f"{simulator.base_url}/urls/demo.json"}])
    day = requests.get(f"{simulator.base_url}/_sim/truth", timeout=5).json()["days"][-1]
    with DagsterInstance.ephemeral() as instance:
        assert not crawl(path, [day], instance=instance).failed
    capsys.readouterr()
    assert main(["export", "--config", str(path)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows and {row["platform"] for row in rows} == {"bilibili", "urls"}
    for row in rows:
        with open(row["path"], "rb") as blob:
            assert hashlib.sha256(blob.read()).hexdigest() == row["sha256"]
    bilibili = [row for row in rows if row["platform"] == "bilibili"]
    assert all(row["meta"].get("title") and row["meta"].get("author_id") for row in bilibili)
    assert all(row["published_at"] for row in bilibili)

    assert main(["export", "--config", str(path), "--platform", "urls"]) == 0
    only_urls = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert only_urls and {row["platform"] for row in only_urls} == {"urls"}


def test_since_rejects_nonsense():
    from media_crawler.commands.durations import since_to_epoch

    assert since_to_epoch("1h", now=7200.0) == 3600.0
    with pytest.raises(ValueError):
        since_to_epoch("yesterday-ish")

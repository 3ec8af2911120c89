"""`media-crawler export --format wacz` of a simulator crawl, judged by the archivists'
own tools as peers: `wacz validate` (py-wacz), warcio (every record read, every payload
digest checked), cdxj-indexer (our index is the one it makes of our WARC) and surt.

The crawl (`crawled`, conftest.py): the simulator's URL list, a Bilibili user (DASH tracks
and their mux), and two URLs answering the same bytes (a revisit).
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from media_crawler.cli import main
from media_crawler.store.ledger import COMMITTED, MUX_VARIANT
from media_crawler.store.open_store import open_answer_store, open_blob_store
from media_crawler_tests.export.support import WACZ_CLI, wacz_members, warc_records

REVISIT_PROFILE = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"


@pytest.fixture(scope="module")
def records(exported):
    return warc_records(exported)


def test_the_crawl_has_what_the_archive_must_show(crawled):
    variants = {row[0] for row in crawled.rows(f"SELECT variant FROM mc_tasks WHERE state = '{COMMITTED}'")}
    assert MUX_VARIANT in variants and any(v.startswith("video-") for v in variants)
    assert any(v.startswith("audio-") for v in variants) and "file" in variants
    twins = crawled.rows("SELECT sha256 FROM mc_tasks WHERE canonical_url LIKE '%/first.jpg' "
                         "OR canonical_url LIKE '%/second.jpg'")
    assert len(twins) == 2 and twins[0] == twins[1]


def test_wacz_validate_passes(exported):
    done = subprocess.run([str(WACZ_CLI), "validate", "-f", str(exported)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and "Validation succeeded" in done.stdout, done.stdout + done.stderr


def test_the_warc_is_stored_whole_in_the_zip_and_the_datapackage_hashes_every_file(exported):
    import zipfile

    with zipfile.ZipFile(exported) as package:
        assert package.getinfo("archive/data.warc.gz").compress_type == zipfile.ZIP_STORED
    members = wacz_members(exported)
    package = json.loads(members["datapackage.json"])
    assert package["profile"] == "data-package" and package["wacz_version"] == "1.1.1"
    listed = {resource["path"]: resource for resource in package["resources"]}
    assert set(listed) == {"archive/data.warc.gz", "indexes/index.cdx", "pages/pages.jsonl"}
    for path, resource in listed.items():
        assert resource["hash"] == "sha256:" + hashlib.sha256(members[path]).hexdigest()
        assert resource["bytes"] == len(members[path])
    digest = json.loads(members["datapackage-digest.json"])
    assert digest["hash"] == "sha256:" + hashlib.sha256(members["datapackage.json"]).hexdigest()


def test_warcio_reads_every_record_and_each_item_is_its_blob(crawled, records):
    store = open_blob_store(crawled.home / "store")
    committed = crawled.rows(f"SELECT sha256 FROM mc_tasks WHERE state = '{COMMITTED}'")
    captures = [r for r in records if r["type"] in ("response", "resource", "revisit")
                and "/bilibili/x/" not in r["headers"]["WARC-Target-URI"]
                and not r["headers"]["WARC-Target-URI"].endswith(".json")]
    assert len(captures) == len(committed)
    for record in captures:
        digest = record["headers"]["WARC-Payload-Digest"]
        assert digest.startswith("sha256:")
        if record["type"] == "revisit":
            assert record["payload"] == b""
            continue
        with store.open(digest.removeprefix("sha256:")) as blob:
            assert record["payload"] == blob.read()
        assert hashlib.sha256(record["payload"]).hexdigest() == digest.removeprefix("sha256:")
        if record["type"] == "response":
            assert record["status"] == "200"
            assert record["http"]["Content-Length"] == str(len(record["payload"]))


def test_each_api_answer_is_a_response_and_its_request(crawled, records):
    answers = crawled.rows("SELECT url, status, sha256 FROM mc_api_answers")
    assert answers
    responses = {r["headers"]["WARC-Record-ID"]: r for r in records if r["type"] == "response"}
    requests_ = [r for r in records if r["type"] == "request"]
    assert len(requests_) == len(answers)
    kept = open_answer_store(crawled.home / "store")
    for request in requests_:
        response = responses[request["headers"]["WARC-Concurrent-To"]]
        assert response["headers"]["WARC-Target-URI"] == request["headers"]["WARC-Target-URI"]
        sha256 = response["headers"]["WARC-Payload-Digest"].removeprefix("sha256:")
        with kept.open(sha256) as body:
            assert response["payload"] == body.read()  # the body as fetched
        assert "Content-Encoding" not in response["http"] and "Transfer-Encoding" not in response["http"]


def test_a_repeated_blob_is_a_revisit_of_its_first_capture(crawled, records):
    first, second = crawled.twin_urls
    by_uri = {r["headers"]["WARC-Target-URI"]: r for r in records if r["type"] in ("response", "revisit")}
    original, revisit = by_uri[first], by_uri[second]
    if original["type"] == "revisit":  # the list's order is not the commit order
        original, revisit, first, second = revisit, original, second, first
    assert original["type"] == "response" and revisit["type"] == "revisit"
    assert revisit["headers"]["WARC-Profile"] == REVISIT_PROFILE
    assert revisit["headers"]["WARC-Payload-Digest"] == original["headers"]["WARC-Payload-Digest"]
    assert revisit["headers"]["WARC-Refers-To-Target-URI"] == first
    assert revisit["headers"]["WARC-Refers-To-Date"] == original["headers"]["WARC-Date"]
    assert original["http"]["ETag"] == '"twin"'  # what the media response said is kept


def test_the_index_is_what_cdxj_indexer_makes_of_our_warc(exported, tmp_path):
    import surt

    members = wacz_members(exported)
    warc = tmp_path / "data.warc.gz"
    warc.write_bytes(members["archive/data.warc.gz"])
    done = subprocess.run([str(Path(sys.executable).with_name("cdxj-indexer")), str(warc)], capture_output=True,
                          timeout=300, check=True)
    ours = members["indexes/index.cdx"].splitlines()
    assert ours == sorted(ours)
    assert sorted(ours) == sorted(done.stdout.splitlines())
    for line in ours:
        key, _ts, fields = line.decode().split(" ", 2)
        assert key == surt.surt(json.loads(fields)["url"])


def test_pages_are_the_posts(exported):
    header, *pages = [json.loads(line) for line in wacz_members(exported)["pages/pages.jsonl"].splitlines()]
    assert header["format"] == "json-pages-1.0"
    urls = [page["url"] for page in pages]
    assert len(urls) == len(set(urls)) and all(page["ts"] for page in pages)
    assert any(url.startswith("https://www.bilibili.com/video/") for url in urls)
    assert any(page.get("title") == "first" for page in pages)


def test_the_same_ledger_exports_the_same_bytes(crawled, exported, tmp_path):
    again = crawled.export(tmp_path / "again.wacz")
    assert again.read_bytes() == exported.read_bytes()


def test_platform_and_day_cut_the_export(crawled, tmp_path):
    only_urls = warc_records(crawled.export(tmp_path / "urls.wacz", "--platform", "urls"))
    uris = [r["headers"]["WARC-Target-URI"] for r in only_urls if r["type"] != "warcinfo"]
    assert uris and not any("bilibili" in uri for uri in uris)
    empty = crawled.export(tmp_path / "empty.wacz", "--day", "2001-01-01")
    assert [r["type"] for r in warc_records(empty)] == ["warcinfo"]
    done = subprocess.run([str(WACZ_CLI), "validate", "-f", str(empty)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout


def test_wacz_needs_an_out_file(crawled, capsys):
    assert main(["export", "--config", str(crawled.config), "--format", "wacz"]) == 2
    assert "--out" in capsys.readouterr().err


def test_an_export_killed_mid_way_is_redone_whole(crawled, exported, tmp_path):
    """What a SIGKILLed export leaves (its partial ZIP, its sort runs) is cleared by the next
    export to the same file, which then writes the same bytes as an export never killed."""
    out = tmp_path / "crawl.wacz"
    (tmp_path / ".crawl.wacz.part").write_bytes(b"PK\x03\x04 half a zip")
    (tmp_path / ".crawl.wacz.sorting").mkdir()
    (tmp_path / ".crawl.wacz.sorting" / "run-x.lines").write_bytes(b"zzz stale line\n")
    crawled.export(out)
    assert out.read_bytes() == exported.read_bytes()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["crawl.wacz"]

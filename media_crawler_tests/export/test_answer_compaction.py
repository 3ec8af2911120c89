"""Kept answers in the archive, before and after `compact --answers-older-than`: an
unchanged page walked again is a `revisit` of its first answer; after the old answers are
released, status and the metrics count fewer, the blob a newer answer shares stays, the
export still validates with every revisit's original in it, and what each media response
said (status, Content-Type, ETag, Last-Modified, Date) is still in the ledger and the WARC."""
from __future__ import annotations

import json
import sqlite3
import subprocess

import pytest

from media_crawler.cli import main
from media_crawler.store.open_store import open_answer_store
from media_crawler_tests.export.support import WACZ_CLI, crawl_days, warc_records, write_home_config

DAY_S = 86_400.0
REVISIT_PROFILE = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"


def _rows(home, sql: str, *params) -> list[tuple]:
    with sqlite3.connect(home / "ledger.db") as conn:
        return conn.execute(sql, params).fetchall()


def _export(config, out) -> list[dict]:
    assert main(["export", "--config", str(config), "--format", "wacz", "--out", str(out)]) == 0
    done = subprocess.run([str(WACZ_CLI), "validate", "-f", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Validation succeeded" in done.stdout, done.stdout + done.stderr
    return warc_records(out)


def _answer_records(records: list[dict]) -> list[dict]:
    """The response and revisit records of API answers (the ones a request is concurrent to)."""
    answered = {r["headers"]["WARC-Concurrent-To"] for r in records if r["type"] == "request"}
    return [r for r in records if r["headers"].get("WARC-Record-ID") in answered]


def _volume(config) -> tuple[dict, str]:
    from prometheus_client import generate_latest

    from media_crawler.config import load_config
    from media_crawler.observe.metrics import ledger_registry
    from media_crawler.observe.status import build_status
    from media_crawler.store.ledger import Ledger

    loaded = load_config(config)
    engine = Ledger(loaded.ledger_url).engine
    return (build_status(engine, loaded, now=0.0)["api_answers_kept"],
            generate_latest(ledger_registry(engine, loaded)).decode())


@pytest.fixture
def walked_twice(crawl_home, simulator):
    """The URL list crawled twice (the same answer twice), the first walk's answers then
    made 100 days old, and one more old answer whose body nothing else has."""
    from media_crawler.pipeline.answers import AnswerKeeper
    from media_crawler.platforms.transport import FetchedAnswer
    from media_crawler.store.ledger import Ledger

    config = write_home_config(crawl_home, simulator.base_url, [{"urls": f"{simulator.base_url}/urls/demo.json"}])
    day = simulator.truth()["days"][-1]
    crawl_days(config, [day])
    crawl_days(config, [day])
    [(first_id,), (second_id,)] = _rows(crawl_home, "SELECT id FROM mc_api_answers ORDER BY id")
    with sqlite3.connect(crawl_home / "ledger.db") as conn:
        conn.execute("UPDATE mc_api_answers SET fetched_at = fetched_at - ? WHERE id = ?", (100 * DAY_S, first_id))
    [(when,)] = _rows(crawl_home, "SELECT fetched_at FROM mc_api_answers WHERE id = ?", first_id)
    keeper = AnswerKeeper(Ledger(f"sqlite:///{crawl_home / 'ledger.db'}"), open_answer_store(crawl_home / "store"))
    keeper.keep(FetchedAnswer(platform="urls", url=f"{simulator.base_url}/urls/gone.json", status=200, reason="OK",
                              headers=(("Content-Type", "application/json"),), body=b'{"items": []}',
                              fetched_at=when, secrets=()))
    return config


def test_an_unchanged_page_walked_again_is_a_revisit_of_its_first_answer(walked_twice, crawl_home, tmp_path):
    records = _export(walked_twice, tmp_path / "before.wacz")
    answers = _answer_records(records)
    demo = [r for r in answers if r["headers"]["WARC-Target-URI"].endswith("/urls/demo.json")]
    assert [r["type"] for r in demo] == ["response", "revisit"]
    original, revisit = demo
    assert revisit["headers"]["WARC-Profile"] == REVISIT_PROFILE and revisit["payload"] == b""
    assert revisit["headers"]["WARC-Payload-Digest"] == original["headers"]["WARC-Payload-Digest"]
    assert revisit["headers"]["WARC-Refers-To-Target-URI"] == original["headers"]["WARC-Target-URI"]
    assert revisit["headers"]["WARC-Refers-To-Date"] == original["headers"]["WARC-Date"]
    assert revisit["status"] == "200" and revisit["http"]["Content-Type"] == original["http"]["Content-Type"]
    assert len(original["payload"]) == int(original["http"]["Content-Length"]) > 0
    index = [json.loads(line.split(b" ", 2)[2]) for line in
             __import__("zipfile").ZipFile(tmp_path / "before.wacz").read("indexes/index.cdx").splitlines()]
    assert sorted(e["mime"] for e in index if e["url"].endswith("/urls/demo.json")) == \
        ["application/json", "warc/revisit"]


def test_compacted_answers_leave_a_whole_archive_and_less_volume(walked_twice, crawl_home, tmp_path, capsys):
    store = open_answer_store(crawl_home / "store")
    answers = _rows(crawl_home, "SELECT id, url, sha256, size FROM mc_api_answers ORDER BY fetched_at, id")
    assert len(answers) == 3
    old_demo, only_old, new_demo = answers  # the gone.json answer is as old as the first demo.json one
    assert only_old[1].endswith("/gone.json") and old_demo[2] == new_demo[2] != only_old[2]
    assert set(store.iter_sha256s()) == {old_demo[2], only_old[2]}
    said_before = _rows(crawl_home, "SELECT id, media_response FROM mc_tasks WHERE state = 'committed' ORDER BY id")
    status, scraped = _volume(walked_twice)
    assert status == {"urls": {"answers": 3, "bytes": sum(row[3] for row in answers)}}
    assert 'media_crawler_api_answers_kept{platform="urls"} 3.0' in scraped

    filed_before = _item_uris(_export(walked_twice, tmp_path / "before.wacz"))

    capsys.readouterr()
    assert main(["compact", "--config", str(walked_twice), "--older-than", "0s", "--answers-older-than", "30d"]) == 0
    said = capsys.readouterr().out
    assert f"released 2 kept API answer(s) ({old_demo[3] + only_old[3]} bytes) and 1 answer blob(s)" in said, said

    assert _rows(crawl_home, "SELECT id FROM mc_api_answers") == [(new_demo[0],)]
    assert set(store.iter_sha256s()) == {new_demo[2]}, "the shared blob stays, the other goes"
    status, scraped = _volume(walked_twice)
    assert status == {"urls": {"answers": 1, "bytes": new_demo[3]}}
    assert 'media_crawler_api_answers_kept{platform="urls"} 1.0' in scraped
    assert f'media_crawler_api_answers_kept_bytes{{platform="urls"}} {float(new_demo[3])}' in scraped

    # What each media response said is kept: in the ledger and in the archive.
    assert _rows(crawl_home, "SELECT media_url FROM mc_tasks WHERE media_url != ''") == [], "compacted"
    said_after = _rows(crawl_home, "SELECT id, media_response FROM mc_tasks WHERE state = 'committed' ORDER BY id")
    assert [(row_id, _without_uri(said)) for row_id, said in said_after] == said_before
    for _id, response in said_before:
        response = json.loads(response)
        assert response["status"] == 200 and response["content_type"]
        assert response["etag"] and response["last_modified"] and response["date"]

    records = _export(walked_twice, tmp_path / "after.wacz")
    [answer] = _answer_records(records)
    assert answer["type"] == "response", "its original released, the answer kept is the original now"
    assert answer["headers"]["WARC-Payload-Digest"] == f"sha256:{new_demo[2]}"
    items = [r for r in records if r["type"] in ("response", "revisit") and r is not answer]
    etags = {json.loads(response)["etag"] for _id, response in said_before}
    assert items and {r["http"].get("ETag") for r in items} == etags
    assert all(r["http"].get("Last-Modified") and r["http"].get("Date") for r in items)
    # Filed where the export before the compaction filed them (the media URLs are gone from
    # the ledger), not under the canonical URL whose #fragment replay drops.
    assert _item_uris(records) == filed_before
    assert not any("#" in uri for uri, _digest in filed_before)


def _item_uris(records: list[dict]) -> list[tuple[str, str]]:
    """(target URI, payload digest) of every media record, answers left out."""
    answers = {id(r) for r in _answer_records(records)}
    return sorted((r["headers"]["WARC-Target-URI"], r["headers"]["WARC-Payload-Digest"]) for r in records
                  if r["type"] in ("response", "revisit") and id(r) not in answers)


def _without_uri(said: str) -> str:
    values = json.loads(said)
    assert values.pop("uri").startswith("http"), "compaction keeps the archive's URI"
    return json.dumps(values, sort_keys=True)

"""The API answers kept as fetched: one ledger row per answer, one blob per distinct body
(identical answers stored once), nothing kept when `keep_api_answers: false`; the body
scrubbed by value, byte for byte, and nothing else of it changed."""
from __future__ import annotations

import sqlite3

from media_crawler.scrub import MASK, mask_secrets_in_bytes, register_secret
from media_crawler.store.open_store import open_answer_store
from media_crawler_tests.export.support import crawl_days, write_home_config


def _answers(home) -> list[tuple]:
    with sqlite3.connect(home / "ledger.db") as conn:
        return conn.execute("SELECT url, status, sha256, size, headers FROM mc_api_answers").fetchall()


def test_identical_answers_are_one_blob_and_each_fetch_a_row(crawl_home, simulator):
    config = write_home_config(crawl_home, simulator.base_url, [{"urls": f"{simulator.base_url}/urls/demo.json"}])
    day = simulator.truth()["days"][-1]
    crawl_days(config, [day])
    crawl_days(config, [day])  # the feed walked again: the same answer
    answers = _answers(crawl_home)
    assert len(answers) == 2 and answers[0][2] == answers[1][2] and answers[0][1] == 200
    store = open_answer_store(crawl_home / "store")
    assert list(store.iter_sha256s()) == [answers[0][2]]
    assert store.size(answers[0][2]) == answers[0][3]
    assert "Content-Length" not in answers[0][4]  # the export writes the kept body's length

    # Their volume, in the status document and the metrics.
    from prometheus_client import generate_latest

    from media_crawler.config import load_config
    from media_crawler.observe.metrics import ledger_registry
    from media_crawler.observe.status import build_status
    from media_crawler.store.ledger import Ledger

    loaded = load_config(config)
    engine = Ledger(loaded.ledger_url).engine
    expected = {"urls": {"answers": 2, "bytes": 2 * answers[0][3]}}
    assert build_status(engine, loaded, now=0.0)["api_answers_kept"] == expected
    scraped = generate_latest(ledger_registry(engine, loaded)).decode()
    assert 'media_crawler_api_answers_kept{platform="urls"} 2.0' in scraped
    assert f'media_crawler_api_answers_kept_bytes{{platform="urls"}} {float(2 * answers[0][3])}' in scraped


def test_keeping_is_off_with_the_setting(crawl_home, simulator):
    config = write_home_config(crawl_home, simulator.base_url, [{"urls": f"{simulator.base_url}/urls/demo.json"}],
                               keep_api_answers=False)
    crawl_days(config, [simulator.truth()["days"][-1]])
    assert _answers(crawl_home) == []
    assert not (crawl_home / "store" / "answers").exists()


def test_a_body_is_scrubbed_by_value_and_nothing_else_changes():
    secret = "kept-answer-secret/+=%2C"
    register_secret(secret)
    body = ('{"next": "https://x.test/p?access_token=' + secret + '&a=1", "echo": "'
            + "a2VwdC1hbnN3ZXItc2VjcmV0Lys9JTJD" + '", "title": "\u4f60\u597d"}').encode()
    kept = mask_secrets_in_bytes(body, ["request-only-value"])
    assert secret.encode() not in kept and b"a2VwdC1hbnN3ZXItc2VjcmV0Lys9JTJD" not in kept  # raw and base64
    assert kept == body.replace(secret.encode(), MASK.encode()).replace(
        b"a2VwdC1hbnN3ZXItc2VjcmV0Lys9JTJD", MASK.encode())
    assert mask_secrets_in_bytes(b"x request-only-value y", ["request-only-value"]) == b"x *** y"


def test_backup_and_restore_carry_the_kept_answers(crawl_home, simulator, tmp_path):
    from media_crawler.config import load_config
    from media_crawler.recovery.backup import backup
    from media_crawler.recovery.restore import restore

    config = write_home_config(crawl_home, simulator.base_url, [{"urls": f"{simulator.base_url}/urls/demo.json"}])
    crawl_days(config, [simulator.truth()["days"][-1]])
    kept = set(open_answer_store(crawl_home / "store").iter_sha256s())
    assert kept
    backup(load_config(config), None, tmp_path / "backup")
    restored = tmp_path / "restored"
    restore(tmp_path / "backup", restored)
    assert set(open_answer_store(restored / "store").iter_sha256s()) == kept


def test_a_lost_blob_fails_the_export_with_one_classified_line(crawl_home, simulator, tmp_path, capsys):
    from media_crawler.cli import main

    config = write_home_config(crawl_home, simulator.base_url, [{"urls": f"{simulator.base_url}/urls/demo.json"}])
    crawl_days(config, [simulator.truth()["days"][-1]])
    store = open_answer_store(crawl_home / "store")
    [lost] = list(store.iter_sha256s())
    store.quarantine(lost)
    out = tmp_path / "lost.wacz"
    assert main(["export", "--config", str(config), "--format", "wacz", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert '"error_class": "storage_error"' in err and lost in err and "Traceback" not in err
    assert not out.exists() and not list(tmp_path.glob(".lost.wacz*"))


def test_on_postgresql_answers_are_kept_and_exported(crawl_home, simulator, postgres, monkeypatch, tmp_path):
    from media_crawler.cli import main
    from media_crawler.store.answers import kept_answers
    from media_crawler.store.ledger import Ledger
    from media_crawler_tests.export.support import warc_records

    url = postgres.create()
    monkeypatch.setenv("MEDIA_CRAWLER_LEDGER_URL", url)  # wins over the file's ledger_url
    config = write_home_config(crawl_home, simulator.base_url, [{"urls": f"{simulator.base_url}/urls/demo.json"}])
    crawl_days(config, [simulator.truth()["days"][-1]])
    [answer] = list(kept_answers(Ledger(url)))
    out = tmp_path / "pg.wacz"
    assert main(["export", "--config", str(config), "--format", "wacz", "--out", str(out)]) == 0
    records = warc_records(out)
    assert [r["headers"]["WARC-Payload-Digest"] for r in records if r["type"] == "response"][0] == \
        f"sha256:{answer.sha256}"
    committed = Ledger(url).state_counts()["committed"]
    assert committed > 1 and sum(r["type"] == "response" for r in records) == 1 + committed


def test_what_the_media_response_said_survives_compaction(crawl_home, simulator):
    import json
    import time

    from media_crawler.store.compaction import compact
    from media_crawler.store.ledger import Ledger

    config = write_home_config(crawl_home, simulator.base_url, [{"urls": f"{simulator.base_url}/urls/demo.json"}])
    crawl_days(config, [simulator.truth()["days"][-1]])
    ledger = Ledger(f"sqlite:///{crawl_home / 'ledger.db'}")
    assert compact(ledger, before=time.time() + 60).rows > 0
    with sqlite3.connect(crawl_home / "ledger.db") as conn:
        rows = conn.execute("SELECT media_url, etag, media_response FROM mc_tasks WHERE state = 'committed'").fetchall()
    assert rows and all(media_url == "" and etag is None for media_url, etag, _said in rows)  # released
    for _url, _etag, said in rows:
        said = json.loads(said)
        assert said["status"] == 200 and said["content_type"].startswith(("image/", "video/"))
        assert said["etag"] and said["last_modified"] and said["date"]


def test_the_manifest_names_the_answer_each_item_was_read_from(crawl_home, simulator, capsys):
    import json

    from media_crawler.cli import main

    config = write_home_config(crawl_home, simulator.base_url, [{"urls": f"{simulator.base_url}/urls/demo.json"},
                                                                {"bilibili": "user 12345"}])
    crawl_days(config, [simulator.truth()["days"][-1]])
    answers = {row[2]: row[0] for row in _answers(crawl_home)}  # sha256 -> URL
    capsys.readouterr()
    assert main(["export", "--config", str(config)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows and all(row["api_answer_sha256"] in answers for row in rows)
    for row in rows:
        url = answers[row["api_answer_sha256"]]
        if row["platform"] == "urls":
            assert url.endswith("/urls/demo.json")
        elif row["kind"] in ("video", "audio"):  # DASH tracks and durl files come from the play URL answer
            assert "/x/player/" in url, url


def test_an_answer_the_store_cannot_take_is_logged_and_the_crawl_goes_on(tmp_path, caplog):
    import errno

    from media_crawler.pipeline.answers import AnswerKeeper
    from media_crawler.platforms.transport import FetchedAnswer
    from media_crawler.store import cas
    from media_crawler.store.ledger import Ledger

    class FullStore(cas.FilesystemBlobStore):
        def put_stream_if_absent(self, stream, sha256=None):
            raise cas.storage_error(OSError(errno.ENOSPC, "No space left on device"), "staging the blob")

    caplog.set_level("INFO", logger="media_crawler.items")
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    keeper = AnswerKeeper(ledger, FullStore(tmp_path / "answers").ensure())
    keeper.keep(FetchedAnswer(platform="urls", url="http://127.0.0.1:1/feed.json", status=200, reason="OK",
                              headers=(), body=b"{}", fetched_at=1.0, secrets=()))
    from media_crawler.store.answers import kept_answers

    assert list(kept_answers(ledger)) == [] and keeper.last_kept() is None
    assert any("answer_not_kept" in str(record.__dict__) and "disk_full" in str(record.__dict__)
               for record in caplog.records)

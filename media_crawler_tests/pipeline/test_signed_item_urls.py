"""A URL list whose item URLs carry signature parameters (`auth_key`, `signature`, ...),
re-signed on every answer: the item is the same item whatever its signature (one ledger
row, one download), and no signature reaches the item's identity, `canonical_url`, the
log lines, `failures` or the crawl's output; the fetch URL keeps it (the CDN needs it)."""
from __future__ import annotations

import hashlib
import itertools
import json
import sqlite3

import pytest
import yaml
from dagster import DagsterInstance

from media_crawler.cli import main as cli_main
from media_crawler.commands.crawl import crawl
from media_crawler_sim.media import Recipe, render
from media_crawler_tests.one_answer_server import local_server

DAY = "2026-11-27"
PICTURE = render(Recipe("jpeg", "signed", 32, 24), seed=1)
SIGNATURE_PARAMS = ("auth_key", "signature", "sig", "X-Amz-Signature", "Policy", "Key-Pair-Id")


def signature(answer: int, name: str) -> str:
    return f"SIGNED{answer}{name.replace('-', '')}Q7"


def signed_query(answer: int) -> str:
    return "&".join(f"{name}={signature(answer, name)}" for name in SIGNATURE_PARAMS)


@pytest.fixture
def signed_feed():
    """A feed re-signed on each answer: a picture that downloads, one that is gone (404)."""
    answers = itertools.count(1)
    served: list[str] = []

    def answer(path: str):
        served.append(path)
        if path.startswith("/feed.json"):
            n = next(answers)
            items = [{"url": f"/media/a.jpg?w=32&{signed_query(n)}"}, {"url": f"/media/b.jpg?{signed_query(n)}"}]
            return 200, {"Content-Type": "application/json"}, json.dumps({"items": items}).encode()
        if path.startswith("/media/a.jpg"):
            return 200, {"Content-Type": "image/jpeg"}, PICTURE
        return 404, {"Content-Type": "text/plain"}, f"no such file: {path}".encode()

    with local_server(answer) as origin:
        yield origin, served


def ledger_texts(ledger_path) -> list[tuple[str, str, str]]:
    """(table, column, value) of every text in the ledger but the fetch URLs."""
    found = []
    with sqlite3.connect(ledger_path) as conn:
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            cursor = conn.execute(f'SELECT * FROM "{table}"')
            columns = [d[0] for d in cursor.description]
            for row in cursor:
                found += [(table, column, value) for column, value in zip(columns, row)
                          if isinstance(value, str) and column not in ("media_url", "backup_urls")]
    return found


def test_a_re_signed_item_url_is_the_same_item_and_its_signature_is_shown_nowhere(
        crawl_home, signed_feed, capsys, caplog):
    origin, served = signed_feed
    crawl_home.mkdir(parents=True, exist_ok=True)
    path = crawl_home / "sources.yaml"
    ledger_path = crawl_home / "ledger.db"
    path.write_text(yaml.safe_dump({"sources": [{"urls": f"{origin}/feed.json"}], "allow_hosts": [origin],
                                    "store": str(crawl_home / "store"), "ledger_url": f"sqlite:///{ledger_path}"}))
    with DagsterInstance.ephemeral() as instance:
        crawl(path, [DAY], instance=instance)
        crawl(path, [DAY], instance=instance)  # the feed answers with new signatures
    cli_main(["failures", "--config", str(path)])
    cli_main(["failures", "--json", "--config", str(path)])

    assert sum(p.startswith("/feed.json") for p in served) == 2, served
    assert sum(p.startswith("/media/a.jpg") for p in served) == 1, "a re-signed URL is an item already stored"
    with sqlite3.connect(ledger_path) as conn:
        rows = conn.execute("SELECT item_id, canonical_url, media_url, state FROM mc_tasks ORDER BY canonical_url").fetchall()
    assert [(canonical, state) for _id, canonical, _url, state in rows] == [
        (f"{origin}/media/a.jpg?w=32", "committed"), (f"{origin}/media/b.jpg", "gone")], rows
    assert rows[0][0] == hashlib.sha256(f"{origin}/media/a.jpg?w=32".encode()).hexdigest(), "identity: unsigned"
    assert signature(1, "signature") in rows[0][2], "the fetch URL keeps its signature until compact"

    output = capsys.readouterr()
    shown = {"ledger": repr(ledger_texts(ledger_path)), "stdout": output.out, "stderr": output.err,
             "logs": caplog.text}
    assert "b.jpg" in output.out + output.err + caplog.text, "the gone item is reported (by its unsigned URL)"
    leaks = [(where, name) for where, text in shown.items() for n in (1, 2) for name in SIGNATURE_PARAMS
             if signature(n, name) in text]
    assert leaks == []

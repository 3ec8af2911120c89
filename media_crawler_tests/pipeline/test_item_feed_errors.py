"""An item of a feed that cannot be normalized is recorded in the ledger and shown by `failures`, without keeping its partition red."""
from __future__ import annotations

import json

import pytest
import yaml
from dagster import DagsterInstance
from sqlalchemy import func, select

from media_crawler.cli import main as cli_main
from media_crawler.commands.crawl import crawl
from media_crawler.config import load_config
from media_crawler.store.ledger import Ledger
from media_crawler.store.schema import feed_errors as F
from media_crawler_tests.one_answer_server import one_answer_server

DAY = "2026-11-27"
FEED = {"items": [{"url": "/media/a.jpg", "sha256": "not-a-digest", "size": 10}]}


@pytest.fixture
def bad_item_feed():
    with one_answer_server(200, json.dumps(FEED).encode(), {"Content-Type": "application/json"}) as origin:
        yield origin


def unresolved(ledger: Ledger) -> list:
    with ledger.engine.connect() as conn:
        return conn.execute(select(F.c.item_id, F.c.error_class).where(F.c.resolved_at.is_(None))).fetchall()


def test_an_item_level_feed_error_reaches_the_ledger_and_failures(crawl_home, bad_item_feed, capsys):
    crawl_home.mkdir(parents=True, exist_ok=True)
    path = crawl_home / "sources.yaml"
    path.write_text(yaml.safe_dump({"sources": [{"urls": f"{bad_item_feed}/feed.json"}], "allow_hosts": [bad_item_feed],
                                    "store": str(crawl_home / "store"),
                                    "ledger_url": f"sqlite:///{crawl_home / 'ledger.db'}"}))
    ledger = Ledger(load_config(path).ledger_url)
    with DagsterInstance.ephemeral() as instance:
        first = crawl(path, [DAY], instance=instance)
        assert not first.failed, "an item that cannot be read is reported, the partition is not red for it"
        [(item_id, error_class)] = unresolved(ledger)
        assert error_class == "parse_error" and item_id.endswith("/media/a.jpg")
        again = crawl(path, [DAY], instance=instance)
        assert not again.failed
    assert len(unresolved(ledger)) == 1, "each walk reports the items it could not read, once"
    with ledger.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(F)).scalar() == 2, "the earlier walk's is resolved"
    capsys.readouterr()
    cli_main(["failures", "--config", str(path)])
    shown = capsys.readouterr().out
    assert "parse_error" in shown and "fetch" in shown, shown

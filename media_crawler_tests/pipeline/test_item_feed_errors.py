"""An item of a feed that cannot be normalized is recorded in the ledger and shown by `failures`, without keeping its partition red."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml
from dagster import DagsterInstance
from sqlalchemy import func, select

from media_crawler.cli import main as cli_main
from media_crawler.commands.crawl import crawl
from media_crawler.config import load_config
from media_crawler.store.ledger import Ledger
from media_crawler.store.schema import feed_errors as F

DAY = "2026-11-27"
FEED = {"items": [{"url": "/media/a.jpg", "sha256": "not-a-digest", "size": 10}]}


class BadItemFeed(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        body = json.dumps(FEED).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args):
        pass


@pytest.fixture
def bad_item_feed():
    server = ThreadingHTTPServer(("127.0.0.1", 0), BadItemFeed)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


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

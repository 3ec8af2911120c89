"""Malformed item URLs in a URL feed: each leaves a ledger row saying disallowed_url (none vanishes,
none becomes the feed's own URL, none is a storage_error), and the feed itself is fetched once."""
from __future__ import annotations

import json
import sqlite3

import pytest

from media_crawler.cli import main
from media_crawler_tests.download.httpserver import Reply, ScriptedServer

MALFORMED = ["http://[]", "http://[::1.]", "http://a[b/", "http:", "http://?", "http://#", "http://",
             "http://ü:pässwörd@127.0.0.1/x.jpg", "http://user@127.0.0.1/x.jpg", "https:", " http:// ",
             "http://\u00e9xample.com:99999/"]


@pytest.fixture
def server():
    with ScriptedServer() as running:
        yield running


def test_every_malformed_item_url_leaves_a_disallowed_row(server, tmp_path):
    feed = server.route("/feed.json", Reply(json.dumps({"items": [{"url": url} for url in MALFORMED]}).encode(),
                                            content_type="application/json"))
    store = tmp_path / "store"
    assert main(["fetch-urls", "--feed", feed, "--store", str(store), "--allow-host", feed, "--processes", "1"]) == 0
    with sqlite3.connect(store / "ledger.db") as conn:
        rows = conn.execute("SELECT media_url, error_class FROM mc_tasks").fetchall()
        feed_errors = conn.execute("SELECT count(*) FROM mc_feed_errors").fetchone()[0]
    assert len(rows) == len({url.strip() for url in MALFORMED}), rows
    assert {error_class for _url, error_class in rows} == {"disallowed_url"}
    assert feed not in {url for url, _ in rows}  # `http:` and friends did not become the feed's URL
    assert len(server.requests_to("/feed.json")) == 1 and feed_errors == 0

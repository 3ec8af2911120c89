"""fetch-urls' download step downloads ahead of verification: a server's 503 with a
Retry-After is met, and waited out, while earlier items are still being verified, not
after them (issue 31), and the Retry-After is still honoured for the request it came with."""
from __future__ import annotations

import json
import time
from datetime import date

import pytest

from media_crawler.config import config_from_dict
from media_crawler.models import DayWindow
from media_crawler.pipeline.discover import discover
from media_crawler.pipeline.download import Workers, download_partition
from media_crawler.pipeline.runtime import Runtime
from media_crawler.pipeline.settle_in_place import verify_and_commit
from media_crawler.platforms.registry import parse_source
from media_crawler.store.database import dispose_engines
from media_crawler_tests.download.httpserver import Reply, ScriptedServer
from media_crawler_sim.hostile.builders import image_bytes


@pytest.fixture
def server():
    with ScriptedServer() as running:
        yield running
    dispose_engines()


def test_a_retry_after_is_waited_out_while_an_earlier_item_is_still_being_verified(server, tmp_path):
    # Largest first (pipeline/scheduling.py): opening.png, then first.png, then later.png.
    opening = image_bytes("PNG", size=(800, 600))
    first = image_bytes("PNG", size=(640, 480))
    later = image_bytes("PNG")
    assert len(opening) > len(first) > len(later)
    opening_url = server.route("/opening.png", Reply(opening, content_type="image/png"))
    first_url = server.route("/first.png", Reply(first, content_type="image/png"))
    later_url = server.route(
        "/later.png",
        Reply(b"busy", status=503, content_type="text/plain", headers={"Retry-After": "1"}),
        Reply(later, content_type="image/png"),
    )
    items = [{"url": url, "size": len(body)} for url, body in
             ((opening_url, opening), (first_url, first), (later_url, later))]
    feed = server.route("/feed.json", Reply(json.dumps({"items": items}).encode(), content_type="application/json"))
    store = tmp_path / "store"
    config = config_from_dict({"store": str(store), "ledger_url": f"sqlite:///{store / 'ledger.db'}",
                               "allow_hosts": ["127.0.0.1:*"], "sources": [{"urls": feed}]})
    runtime, source = Runtime.from_config(config), parse_source("urls", feed)
    discover(runtime, source, DayWindow(date.today()))

    events: list[str] = []

    def verify_slowly(item):
        """first.png's verification lasts until later.png's retry has been asked for
        (one worker: were the next download waiting for this verification, that would
        never happen; the wait's limit only ends a failing run). opening.png, committed
        before, is what lets the downloads run ahead (download.py `_RunAhead`)."""
        if item.task.canonical_url.endswith("/first.png"):
            for _ in range(200):
                if len(server.requests_to("/later.png")) == 2:
                    break
                time.sleep(0.05)
            events.append(f"{len(server.requests_to('/later.png'))} requests to later.png when first.png verified")
        return verify_and_commit(runtime, item)

    report = download_partition(runtime, source, None, ignore_backoff=True,
                                workers=Workers(1, wait_threads=1, after_download=verify_slowly))

    assert report.still_unfinished == 0 and report.extra["items_committed"] == 3
    assert events == ["2 requests to later.png when first.png verified"]
    # The 503 and then its retry: one request each, the Retry-After waited (not hammered).
    assert [entry.status for entry in server.requests_to("/later.png")] == [503, 200]


def test_an_adapter_whose_download_hooks_are_the_defaults_needs_no_record_per_item():
    # _download_one makes no MediaRecord for such an adapter (the URL-list one), and takes no
    # lifetime and no headers: what its hooks answer for any record, signed (resolve_ref) or not.
    from media_crawler.models import MediaRecord
    from media_crawler.pipeline.download import _BatchContext
    from media_crawler.platforms.bilibili.client import BilibiliAdapter
    from media_crawler.platforms.facebook.client import FacebookAdapter
    from media_crawler.platforms.urls.client import UrlsAdapter
    from media_crawler.platforms.weibo.client import WeiboAdapter

    step = _BatchContext("owner", {}, None, 1, None, 0, None)
    urls = object.__new__(UrlsAdapter)
    assert step.record_free(urls) and step.record_free(urls)  # (the second answer is the kept one)
    for ref in (None, "post:1"):
        record = MediaRecord(platform="urls", item_id="1", variant="file", kind="image", canonical_url="https://e/1",
                             media_url="https://e/1.jpg", resolve_ref=ref)
        assert urls.url_lifetime_for(record) is None and urls.download_headers(record) == {}
    # Signed URLs that expire, or CDN headers: their hooks are asked with the item's record.
    assert not any(step.record_free(object.__new__(kind)) for kind in (BilibiliAdapter, FacebookAdapter, WeiboAdapter))

"""The hostile-URL corpus through the real request paths: 0 connects to an internal address
or an unlisted port, every refusal disallowed_url, as item URLs (direct and behind each
redirect code, the feed on a public-looking name or on 127.0.0.1), as feed URLs and as `next` links."""
from __future__ import annotations

import json
import sqlite3
from datetime import date

import pytest

from media_crawler.cli import main
from media_crawler.config import config_from_dict
from media_crawler.errors import CrawlError, ErrorClass, policy_for
from media_crawler.models import DayWindow
from media_crawler.platforms.registry import parse_source
from media_crawler.net.redirects import REDIRECT_STATUSES
from media_crawler.pipeline.runtime import Runtime
from media_crawler_tests.download.httpserver import Reply, ScriptedServer
from media_crawler_tests.net.connect_recorder import ConnectRecorder
from media_crawler_tests.net.hostile_urls import RESOLVER, corpus, header_safe

PUBLIC_FEED_HOST = "feed.example.test"
PUBLIC_FEED_ADDRESS = "93.184.216.34"  # the test resolver's answer; the recorder carries it to the local server
UNLISTED_PORT = 9  # on 127.0.0.1; nothing lists it, and the recorder would refuse it anyway


@pytest.fixture
def world(monkeypatch, tmp_path):
    with ScriptedServer() as server:
        recorder = ConnectRecorder(
            local_ports={server.port},
            aliases={(PUBLIC_FEED_ADDRESS, 80): ("127.0.0.1", server.port)},
            names={**RESOLVER, PUBLIC_FEED_HOST: [PUBLIC_FEED_ADDRESS]},
        ).install(monkeypatch)
        for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        yield server, recorder, tmp_path


CASES = sorted(set(corpus(UNLISTED_PORT)), key=lambda case: case[1])
REDIRECTABLE = [(kind, url) for kind, url in CASES if header_safe(url)]


def test_the_corpus_is_large_and_covers_every_class():
    kinds = {kind for kind, _url in CASES}
    assert len(CASES) >= 100 and len({url for _kind, url in CASES}) == len(CASES)
    assert kinds == {"numeric_metadata", "parser_confusion", "private_loopback", "resolves_internally", "scheme",
                     "malformed"}


def assert_nothing_internal_reached(recorder: ConnectRecorder, server: ScriptedServer) -> None:
    allowed = {("127.0.0.1", server.port), (PUBLIC_FEED_ADDRESS, 80)}
    assert recorder.attempted() <= allowed, sorted(recorder.attempted() - allowed)


def fetch_urls(feed_url: str, store, *allow: str) -> int:
    argv = ["fetch-urls", "--feed", feed_url, "--store", str(store), "--processes", "1", "--workers", "4"]
    for entry in allow:
        argv += ["--allow-host", entry]
    return main(argv)


def ledger_rows(store) -> dict[str, tuple[str, str | None]]:
    with sqlite3.connect(store / "ledger.db") as conn:
        return {url: (state, error_class) for url, state, error_class in
                conn.execute("SELECT media_url, state, error_class FROM mc_tasks")}


def serve_items(server: ScriptedServer, items: list[str]) -> None:
    body = json.dumps({"items": [{"url": url} for url in items]}).encode()
    server.route("/feed.json", Reply(body, content_type="application/json"))


def redirect_items(server: ScriptedServer, origin: str) -> list[str]:
    """One item per (redirect code, hostile URL): an allowed URL answering that code to it."""
    items = []
    for code in REDIRECT_STATUSES:
        for index, (_kind, url) in enumerate(REDIRECTABLE):
            path = f"/r{code}/{index}"
            server.route(path, Reply(status=code, headers={"Location": url}))
            items.append(f"{origin}{path}")
    return items


@pytest.mark.parametrize("feed_on", ["public_name", "loopback"])
def test_item_urls_direct_and_behind_every_redirect_code_are_refused_before_connecting(world, feed_on):
    server, recorder, tmp = world
    if feed_on == "public_name":
        origin, allow = f"http://{PUBLIC_FEED_HOST}", ()
    else:  # the feed on 127.0.0.1, listed with its port: its other ports stay closed
        origin, allow = f"http://127.0.0.1:{server.port}", (f"127.0.0.1:{server.port}",)
    direct = [url for _kind, url in CASES]
    via_redirect = redirect_items(server, origin)
    serve_items(server, direct + via_redirect)
    store = tmp / "store"

    assert fetch_urls(f"{origin}/feed.json", store, *allow) == 0  # finished: every item refused for good (gone)

    rows = ledger_rows(store)
    assert len(rows) >= len(set(direct) | set(via_redirect)) - 5  # a few spellings name one item (same URL joined)
    assert {error_class for _state, error_class in rows.values()} == {ErrorClass.DISALLOWED_URL.value}
    assert {state for state, _error_class in rows.values()} == {policy_for(ErrorClass.DISALLOWED_URL).final_state.value}
    assert_nothing_internal_reached(recorder, server)
    redirected = {entry.path for entry in server.log if entry.path.startswith("/r")}
    assert len(redirected) == len(via_redirect)  # each hop really was offered, and refused at its Location


def feed_error_classes(tmp, feed_urls: list[str]) -> dict[str, ErrorClass]:
    """The error class each feed URL's walk ends with, through a runtime's urls adapter."""
    runtime = Runtime.from_config(config_from_dict({"store": str(tmp / "store"),
                                                    "ledger_url": f"sqlite:///{tmp / 'ledger.db'}"}))
    adapter, classes = runtime.adapter("urls"), {}
    for url in feed_urls:
        with pytest.raises(CrawlError) as caught:
            list(adapter.iter_records(parse_source("urls", url), DayWindow(date(2026, 11, 26))))
        classes[url] = caught.value.error_class
    return classes


def test_feed_urls_are_refused_before_connecting(world):
    server, recorder, tmp = world
    classes = feed_error_classes(tmp, [url for _kind, url in CASES])
    assert {url: c for url, c in classes.items() if c is not ErrorClass.DISALLOWED_URL} == {}
    assert_nothing_internal_reached(recorder, server)
    assert recorder.connects == []  # not one connect: every refusal came before the first


def test_next_links_direct_and_behind_redirects_are_refused(world):
    server, recorder, tmp = world
    feeds = []
    for index, (_kind, url) in enumerate(CASES):
        feeds.append(server.route(f"/next/{index}.json", Reply(json.dumps({"items": [], "next": url}).encode(),
                                                               content_type="application/json")))
    for code in REDIRECT_STATUSES:
        for index, (_kind, url) in enumerate(REDIRECTABLE):
            server.route(f"/hop{code}/{index}", Reply(status=code, headers={"Location": url}))
            feeds.append(server.route(f"/nextr{code}/{index}.json", Reply(
                json.dumps({"items": [], "next": f"/hop{code}/{index}"}).encode(), content_type="application/json")))
    feeds = [url.replace(f"127.0.0.1:{server.port}", PUBLIC_FEED_HOST) for url in feeds]

    classes = feed_error_classes(tmp, feeds)
    assert {url: c for url, c in classes.items() if c is not ErrorClass.DISALLOWED_URL} == {}
    assert_nothing_internal_reached(recorder, server)
    assert not any(entry.path.startswith("/latest") for entry in server.log)


def test_a_refused_next_link_is_a_feed_error_of_fetch_urls_and_its_answer_is_never_kept(world):
    server, recorder, tmp = world
    server.route("/feed.json", Reply(json.dumps({"items": [], "next": "http://169.254.169.254/latest/meta-data/iam/"})
                                     .encode(), content_type="application/json"))
    store = tmp / "store"
    assert fetch_urls(f"http://{PUBLIC_FEED_HOST}/feed.json", store) == 1
    with sqlite3.connect(store / "ledger.db") as conn:
        errors = conn.execute("SELECT error_class, raw_body FROM mc_feed_errors").fetchall()
    assert errors and errors[0] == ("disallowed_url", None)
    assert_nothing_internal_reached(recorder, server)


def test_a_feed_name_that_resolves_to_loopback_does_not_open_its_ports(world):
    """The feed's own host is trusted for its origin only: a name answering 127.0.0.1 is refused
    unless listed, and listed with a port it reaches that port alone."""
    server, recorder, tmp = world
    recorder.names["sneaky.example.test"] = ["127.0.0.1"]
    server.route("/feed.json", Reply(json.dumps({"items": [{"url": f"http://sneaky.example.test:{UNLISTED_PORT}/a"}]})
                                     .encode(), content_type="application/json"))
    feed = f"http://sneaky.example.test:{server.port}/feed.json"
    assert fetch_urls(feed, tmp / "refused") == 1  # not listed: the feed itself is refused
    assert recorder.connects == []
    assert fetch_urls(feed, tmp / "listed", f"sneaky.example.test:{server.port}") == 0
    gone = policy_for(ErrorClass.DISALLOWED_URL).final_state.value
    assert ledger_rows(tmp / "listed") == {f"http://sneaky.example.test:{UNLISTED_PORT}/a": (gone, "disallowed_url")}
    assert recorder.attempted() == {("127.0.0.1", server.port)}

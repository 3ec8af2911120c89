"""pywb, the Webrecorder replay server, replays our WACZ: loaded as an archivist would
(`wb-manager add --unpack-wacz`, which keeps our index), served by `wayback` on
127.0.0.1, asked for each capture's raw bytes (`/<coll>/<timestamp>id_/<url>`, the
"identity" mode that rewrites nothing).

- every committed item's URL answers its blob's exact bytes (DASH tracks, the mux, the
  URL lists' files), and the revisit of a repeated blob resolves to its original's;
- every kept API answer replays its status and body exactly as kept.

pywb lives in a virtualenv of its own (`make pywb`: .venv-pywb; it pins redis 2.10, which
cannot share .venv with the test extra). Absent, these tests skip, naming it; under CI
(MEDIA_CRAWLER_REQUIRE_SERVICES=1) they fail.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
import requests

from media_crawler.export.records import item_date, item_uri
from media_crawler.store.ledger import MUX_VARIANT, Ledger
from media_crawler.store.open_store import open_answer_store, open_blob_store
from media_crawler.store.reports.reads import committed_rows
from media_crawler_tests import services
from media_crawler_tests.export.support import warc_records
from media_crawler_tests.observe.promtool import free_port

REPO = Path(__file__).resolve().parents[2]
# Where `make pywb` puts it; MEDIA_CRAWLER_PYWB_VENV names another.
PYWB_VENV = Path(os.environ.get("MEDIA_CRAWLER_PYWB_VENV", REPO / ".venv-pywb"))
COLLECTION = "crawl"
START_TIMEOUT_S = 120.0  # a loaded 2-core CI machine has taken 11 s


def pywb_bin(name: str) -> Path:
    path = PYWB_VENV / "bin" / name
    if not os.access(path, os.X_OK):
        services.missing("pywb", f"pywb is not installed in {PYWB_VENV} (`make pywb` installs it there)")
    return path


def timestamp(epoch: float) -> str:
    return datetime.fromtimestamp(int(epoch), tz=timezone.utc).strftime("%Y%m%d%H%M%S")


class Replay:
    def __init__(self, base: str) -> None:
        self.base = base

    def raw(self, url: str, epoch: float, **headers: str) -> requests.Response:
        """The capture of `url` closest to `epoch`, as pywb replays it unrewritten; its body
        read as sent (`body`), no Content-Encoding undone on the way."""
        # The archived URL goes into the path as is: pywb takes everything after `id_/`
        # (and the query) as the URL. A fragment is no part of an HTTP request (a browser
        # keeps it), so it is not part of what replay looks up either.
        url = url.split("#", 1)[0]
        answer = requests.get(f"{self.base}/{COLLECTION}/{timestamp(epoch)}id_/{url}",
                              headers=headers, timeout=30, stream=True, allow_redirects=False)
        answer.body = answer.raw.read(decode_content=False)
        # The bytes are what a client gets: nothing says they are to be decoded first.
        assert "Content-Encoding" not in answer.headers, (url, answer.headers)
        return answer


# Package-scoped and autouse only so that pytest asks for it before the package's crawl:
# without pywb the tests skip (or fail) at once, not after crawling for nothing.
@pytest.fixture(scope="package", autouse=True)
def pywb_tools() -> tuple[Path, Path]:
    return pywb_bin("wb-manager"), pywb_bin("wayback")


@pytest.fixture(scope="module")
def replay(pywb_tools, exported, tmp_path_factory):
    wb_manager, wayback = pywb_tools
    root = tmp_path_factory.mktemp("pywb")
    for args in (["init", COLLECTION], ["add", "--unpack-wacz", COLLECTION, str(exported)]):
        done = subprocess.run([str(wb_manager), *args], cwd=root, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    port = free_port()
    log_path = root / "wayback.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen([str(wayback), "--bind", "127.0.0.1", "--port", str(port)], cwd=root,
                                  stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_listening(server, port, log_path)
        yield Replay(f"http://127.0.0.1:{port}")
    finally:
        # A throwaway server over a throwaway folder: killed, not asked. wayback lets a
        # SIGTERM wait out its 10 s here, every time.
        server.kill()
        server.wait(timeout=10)


def _wait_listening(server: subprocess.Popen, port: int, log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"wayback did not start (exit {server.poll()}):\n{log_path.read_text(errors='replace')}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def committed(crawled):
    ledger = Ledger(f"sqlite:///{crawled.ledger}")
    try:
        return list(committed_rows(ledger))
    finally:
        ledger.engine.dispose()


def test_every_committed_item_replays_its_blob(crawled, committed, replay):
    variants = {row.variant for row in committed}
    assert {MUX_VARIANT, "file"} <= variants and any(v.startswith("video-") for v in variants), variants
    assert any(v.startswith("audio-") for v in variants), variants
    store = open_blob_store(crawled.home / "store")
    for row in committed:
        uri = item_uri(row)
        answer = replay.raw(uri, item_date(row))
        assert answer.status_code == 200, (uri, answer.status_code, answer.body[:300])
        assert hashlib.sha256(answer.body).hexdigest() == row.sha256, uri
        with store.open(row.sha256) as blob:
            assert answer.body == blob.read(), uri


def test_a_revisit_replays_its_originals_bytes(crawled, exported, replay):
    revisits = {r["headers"]["WARC-Target-URI"]: r for r in warc_records(exported) if r["type"] == "revisit"}
    twin = next(url for url in crawled.twin_urls if url in revisits)  # the one committed second
    record = revisits[twin]
    original = record["headers"]["WARC-Refers-To-Target-URI"]
    assert original != twin and original in crawled.twin_urls
    digest = record["headers"]["WARC-Payload-Digest"].removeprefix("sha256:")
    epoch = datetime.strptime(record["headers"]["WARC-Date"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=timezone.utc).timestamp()
    answer = replay.raw(twin, epoch)
    assert answer.status_code == 200, answer.body[:300]
    with open_blob_store(crawled.home / "store").open(digest) as blob:
        assert answer.body == blob.read()
    # The revisit's own HTTP headers, as pywb passes an archived response's on.
    assert answer.headers["X-Archive-Orig-ETag"] == '"twin"'


def test_every_api_answer_replays_its_body_as_kept(crawled, replay):
    answers = crawled.rows("SELECT url, fetched_at, status, sha256, headers FROM mc_api_answers")
    assert any(url.endswith("/list.json") for url, *_ in answers)  # a feed page
    assert any("/bilibili/" in url for url, *_ in answers)  # detail and play-URL answers
    kept = open_answer_store(crawled.home / "store")
    for url, fetched_at, status, sha256, headers in answers:
        answer = replay.raw(url, fetched_at)
        assert answer.status_code == status, (url, answer.body[:300])
        kept_type = next(value for name, value in json.loads(headers) if name.lower() == "content-type")
        assert answer.headers["Content-Type"] == kept_type, url
        with kept.open(sha256) as body:
            assert answer.body == body.read(), url


def test_a_range_of_a_track_replays_as_a_206_of_its_bytes(crawled, committed, replay):
    """A player asks for media in ranges (ReplayWeb.page and browsers do): pywb cuts them
    from our one 200 record of the whole blob."""
    store = open_blob_store(crawled.home / "store")
    for row in (r for r in committed if r.variant == MUX_VARIANT or r.variant.startswith("video-")):
        with store.open(row.sha256) as blob:
            whole = blob.read()
        answer = replay.raw(item_uri(row), item_date(row), Range="bytes=10-99")
        assert answer.status_code == 206, item_uri(row)
        assert answer.body == whole[10:100]
        assert answer.headers["Content-Range"] == f"bytes 10-99/{len(whole)}"

"""The crawl the WACZ tests export (test_wacz_export.py, test_pywb_replay.py), made once for
the package: the simulator's URL list, a Bilibili user (DASH video and audio tracks, muxed
by test_mux_tracks.py's stand-in ffmpeg, covers) and a URL list of our own whose two URLs
answer the same bytes (the same content at another URL: a revisit), in-process through the
stages; the feeds' answers kept as fetched. Tests export it, never change it."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import requests

from media_crawler.cli import main
from media_crawler_sim.server import Simulator
from media_crawler_tests.export.support import crawl_days, ffmpeg_on_path, write_home_config
from media_crawler_tests.one_answer_server import local_server


class Crawled:
    def __init__(self, home: Path, config: Path, days: list[str], twin_urls: list[str]) -> None:
        self.home, self.config, self.days, self.twin_urls = home, config, days, twin_urls
        self.ledger = home / "ledger.db"

    def rows(self, sql: str) -> list[tuple]:
        with sqlite3.connect(self.ledger) as conn:
            return conn.execute(sql).fetchall()

    def export(self, out: Path, *args: str) -> Path:
        assert main(["export", "--config", str(self.config), "--format", "wacz", "--out", str(out), *args]) == 0
        return out


@pytest.fixture(scope="package")
def crawled(tmp_path_factory):
    home = tmp_path_factory.mktemp("wacz-home")
    with pytest.MonkeyPatch.context() as patch, Simulator(seed=1, port=0) as sim:
        patch.setenv("MEDIA_CRAWLER_HOME", str(home))
        patch.delenv("MEDIA_CRAWLER_LEDGER_URL", raising=False)
        patch.setenv("FB_ACCESS_TOKEN", "test-token-FAKE9f8e7d6c")
        patch.setenv("PATH", ffmpeg_on_path(home.parent / "bin"))
        demo_jpeg = requests.get(f"{sim.base_url}/media/urls/demo/tiny.jpg", timeout=10).content
        # Bytes of their own (a JPEG comment after the start marker), or the twins would
        # both be revisits of the demo list's capture of tiny.jpg.
        jpeg = demo_jpeg[:2] + b"\xff\xfe\x00\x06twin" + demo_jpeg[2:]

        def twins(path: str):
            if path.startswith("/list.json"):
                items = [{"url": "/first.jpg", "title": "first"}, {"url": "/second.jpg", "title": "second"}]
                return 200, {"Content-Type": "application/json"}, json.dumps({"items": items}).encode()
            return 200, {"Content-Type": "image/jpeg", "ETag": '"twin"'}, jpeg

        with local_server(twins) as origin:
            days = sim.truth()["days"][-1:]
            config = write_home_config(home, sim.base_url, [
                {"urls": f"{sim.base_url}/urls/demo.json"}, {"bilibili": "user 12345"}, {"urls": f"{origin}/list.json"},
            ], mux=True, allow_hosts=[sim.base_url, origin])
            crawl_days(config, days)
            from media_crawler.store.database import dispose_engines

            dispose_engines()
            yield Crawled(home, config, days, [f"{origin}/first.jpg", f"{origin}/second.jpg"])


@pytest.fixture(scope="package")
def exported(crawled, tmp_path_factory):
    return crawled.export(tmp_path_factory.mktemp("wacz-out") / "crawl.wacz")

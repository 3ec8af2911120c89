"""A platform that echoes the credentials back (the simulator's echo profile): the kept
API answers and the WACZ exported from them hold no canary, in any encoding, in any byte
(every member unzipped, the WARC's gzip members decompressed). The echoes did arrive:
the kept bodies and headers show the scrubber's mask where they were.

The crawl runs in this process through the stages, with the canaries in its environment
(as a crawl reads its credentials); test_echoed_secrets.py searches a real CLI crawl's
home, the kept answers included.
"""
from __future__ import annotations

import json
import sqlite3

import pytest

from media_crawler.cli import main
from media_crawler.store.database import dispose_engines
from media_crawler.store.open_store import open_answer_store
from media_crawler_sim.app import Behaviour
from media_crawler_sim.server import Simulator
from media_crawler_tests.export.support import crawl_days, unpacked_bytes
from media_crawler_tests.observe.echo_support import ENVIRONMENT, leaks_in_bytes, report, signed_feed, write_config


@pytest.fixture(scope="module")
def echoed(tmp_path_factory):
    home = tmp_path_factory.mktemp("echo-wacz-home")
    with pytest.MonkeyPatch.context() as patch, Simulator(seed=1, port=0, behaviour=Behaviour(echo_secrets=True)) as sim:
        for name, value in ENVIRONMENT.items():
            patch.setenv(name, value)
        patch.setenv("MEDIA_CRAWLER_HOME", str(home))
        patch.delenv("MEDIA_CRAWLER_LEDGER_URL", raising=False)
        config = write_config(tmp_path_factory.mktemp("echo-wacz-config"), home, sim.base_url, [
            {"bilibili": "user 12345"}, {"weibo": "user 678"}, {"weibo": "user 679", "api": "ajax"},
            {"facebook": "page 42"}, {"urls": signed_feed(sim.base_url)},
        ])
        # The first day meets the error answers, the second the redirects and echoing bodies.
        crawl_days(config, sim.truth()["days"][-2:])
        out = tmp_path_factory.mktemp("echo-wacz-out") / "echo.wacz"
        assert main(["export", "--config", str(config), "--format", "wacz", "--out", str(out)]) == 0
        assert sim.echoed_credentials(), "the simulator saw no credential: nothing was echoed"
        dispose_engines()
        yield home, out


def test_no_canary_in_any_byte_of_the_wacz(echoed):
    _home, wacz = echoed
    members = unpacked_bytes(wacz)
    assert "archive/data.warc.gz" in members
    leaks = [leak for name, data in members.items() for leak in leaks_in_bytes(data, f"{wacz.name}:{name}")]
    assert leaks == [], report(leaks)


def test_the_echoes_were_kept_and_masked(echoed):
    home, _wacz = echoed
    with sqlite3.connect(home / "ledger.db") as conn:
        answers = conn.execute("SELECT platform, sha256, headers FROM mc_api_answers").fetchall()
    assert {platform for platform, _sha, _headers in answers} >= {"bilibili", "weibo", "facebook", "urls"}
    store = open_answer_store(home / "store")
    masked_bodies = 0
    for _platform, sha256, _headers in answers:
        with store.open(sha256) as body:
            masked_bodies += b"***" in body.read()
    assert masked_bodies > 0
    headers = [pair for _p, _s, kept in answers for pair in json.loads(kept)]
    assert any(name.lower() == "set-cookie" and value.endswith("=***") for name, value in headers)
    assert any(name.lower().startswith("x-echo") and "***" in value for name, value in headers)

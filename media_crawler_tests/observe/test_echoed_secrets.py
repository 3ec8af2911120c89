"""A hostile platform echoes the credentials back (the simulator's echo profile, media_crawler_sim/echo.py:
error bodies, redirects, headers, titles, ids, cursors, next links and media URLs with the
value in query, path, fragment and userinfo). Through a Dagster `crawl` and a `fetch-urls`,
both real CLI processes with homes of their own: no canary, in any of its encodings (raw,
URL-encoded, URL-decoded, base64), in any file under the homes, in any row of any database
(the ledger, Dagster's run and event storage), on stdout or on stderr.

The encodings are computed by echo_support.py, not by media_crawler.scrub: the scrubber is
what is under test. Besides the exact forms, each text is also searched once percent-decoded
(a URL-encoding spelled another way: `,` or `/` left as is, `+` for a space). A failure
lists every hit with its file, table or stream and the text around it, the canary shown as
<CANARY>.
"""
from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from media_crawler_sim.app import Behaviour
from media_crawler_sim.server import Simulator
from media_crawler_tests.observe.echo_support import (
    CANARIES, ENVIRONMENT, FB_TOKEN, SESSDATA, WEIBO_SUB, WEIBO_SUBP, canary_encodings, leaks_in_bytes,
    leaks_in_databases, leaks_in_files, leaks_in_text, report, signed_feed, sqlite_files, write_config,
)

REPO = Path(__file__).resolve().parents[2]
CLI = Path(sys.executable).with_name("media-crawler")
TEMPLATE = REPO / "media_crawler" / "instance" / "dagster.yaml"
TIMEOUT_S = 180


@dataclass
class Run:
    home: Path
    sim: Simulator
    stdout: str
    stderr: str
    returncode: int
    ledger: Path
    config: Path | None = None

    def ledger_rows(self, sql: str) -> list[tuple]:
        with sqlite3.connect(self.ledger) as conn:
            return conn.execute(sql).fetchall()


def _environment(home: Path, **extra: str) -> dict[str, str]:
    """The test process's environment (the canaries monkeypatched in), a home of its own."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("MEDIA_CRAWLER_", "DAGSTER_"))}
    env.update({"MEDIA_CRAWLER_HOME": str(home), **extra})
    env.update({"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})  # no proxy sees the sim
    assert all(env[name] == value for name, value in ENVIRONMENT.items())
    return env


@pytest.fixture(scope="module")
def canary_environment():
    with pytest.MonkeyPatch.context() as patch:
        for name, value in ENVIRONMENT.items():
            patch.setenv(name, value)
        yield


@pytest.fixture(scope="module")
def echo_crawl(tmp_path_factory, canary_environment):
    """`media-crawler crawl` of every demo source (the URL list behind a signed feed URL)
    for the simulator's last two days, in a process of its own: MEDIA_CRAWLER_HOME and
    DAGSTER_HOME (SQLite run and event storage on disk, the project's instance settings)
    in one home. The first day meets the error answers (some partitions fail on them),
    the second the redirects and echoing bodies."""
    home = tmp_path_factory.mktemp("echo-crawl-home")
    dagster_home = home / "dagster_home"
    dagster_home.mkdir()
    shutil.copyfile(TEMPLATE, dagster_home / "dagster.yaml")
    with Simulator(seed=1, port=0, behaviour=Behaviour(echo_secrets=True)) as sim:
        base = sim.base_url
        days = sim.truth()["days"][-2:]
        config_path = write_config(tmp_path_factory.mktemp("echo-crawl-config"), home, base, [
            {"bilibili": "user 12345"}, {"weibo": "user 678"}, {"weibo": "user 679", "api": "ajax"},
            {"facebook": "page 42"}, {"facebook": "page 43"}, {"urls": signed_feed(base)},
        ])
        env = _environment(home, DAGSTER_HOME=str(dagster_home), MEDIA_CRAWLER_CONFIG=str(config_path))
        command = [str(CLI), "crawl", "--config", str(config_path)] + [arg for day in days for arg in ("--day", day)]
        done = subprocess.run(command, env=env, cwd=home, capture_output=True, text=True, timeout=TIMEOUT_S)
        yield Run(home, sim, done.stdout, done.stderr, done.returncode, home / "ledger.db", config_path)


@pytest.fixture(scope="module")
def echo_fetch(tmp_path_factory, canary_environment):
    """`media-crawler fetch-urls` of the echo profile's URL list behind a signed feed URL
    (the token and the session cookie in its query: how a plain list carries credentials)."""
    home = tmp_path_factory.mktemp("echo-fetch-home")
    with Simulator(seed=1, port=0, behaviour=Behaviour(echo_secrets=True)) as sim:
        command = [str(CLI), "fetch-urls", "--feed", signed_feed(sim.base_url), "--store", str(home / "store"),
                   "--allow-host", "127.0.0.1:*", "--workers", "4", "--processes", "1"]
        done = subprocess.run(command, env=_environment(home), cwd=home, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
        yield Run(home, sim, done.stdout, done.stderr, done.returncode, home / "store" / "ledger.db")


def _saw(sim: Simulator, value: str) -> bool:
    return any(value == seen or value in seen for seen in sim.echoed_credentials())


# --- the search itself finds what it looks for ---------------------------------------------


def test_the_search_finds_every_encoding_in_files_and_database_rows(tmp_path):
    spellings = {**canary_encodings(FB_TOKEN), "re-encoded query value": "EAAc4nTOK9f3e/+7a%3D,fb%3D%3D"}
    for name, form in spellings.items():
        assert leaks_in_bytes(f"x={form}&y".encode(), "probe"), name
    database = tmp_path / "probe.db"
    with sqlite3.connect(database) as conn:
        conn.execute("CREATE TABLE probe (id INTEGER PRIMARY KEY, text TEXT)")
        conn.executemany("INSERT INTO probe (text) VALUES (?)", [(f"[{form}]",) for form in spellings.values()])
    hits = leaks_in_databases(tmp_path)
    assert {leak.where for leak in hits} == {"probe.db :: probe"} and len(hits) >= len(spellings)
    assert leaks_in_files(tmp_path)
    assert not leaks_in_bytes(b"EAAc4nTOK9f3e/+7a=***", "probe")  # a masked value is no leak


def test_the_echo_profile_is_off_by_default_and_switched_by_the_control_endpoint():
    cookie = {"Cookie": f"buvid3=B; SESSDATA={SESSDATA}"}
    echo = Behaviour(echo_secrets=True)
    with Simulator(seed=1, port=0) as plain, Simulator(seed=1, port=0, behaviour=echo) as echoing:
        path = "/bilibili/x/web-interface/nav"
        quiet = requests.get(plain.base_url + path, headers=cookie, timeout=5)
        assert "X-Echo" not in quiet.headers and SESSDATA not in quiet.text and not plain.echoed_credentials()
        assert requests.get(f"{plain.base_url}/_sim/echo", timeout=5).json()["enabled"] is False
        loud = requests.get(echoing.base_url + path, headers=cookie, timeout=5)
        assert loud.headers["X-Echo-Raw"] == SESSDATA and SESSDATA in loud.text
        assert echoing.echoed_credentials()[0] == SESSDATA
        assert requests.post(f"{echoing.base_url}/_sim/echo?on=0", timeout=5).json()["enabled"] is False
        off = requests.get(echoing.base_url + path, headers=cookie, timeout=5)
        assert off.content.replace(echoing.base_url.encode(), b"") == quiet.content.replace(plain.base_url.encode(), b"")
        assert requests.post(f"{plain.base_url}/_sim/echo?on=1", timeout=5).json()["enabled"] is True
        assert requests.get(plain.base_url + path, headers=cookie, timeout=5).headers["X-Echo-Raw"] == SESSDATA


# --- the runs were real: secrets sent, echoes answered, media stored ------------------------


def test_the_crawl_sent_every_secret_and_got_them_echoed(echo_crawl):
    sim = echo_crawl.sim
    assert echo_crawl.ledger.exists(), echo_crawl.stderr[-3000:]
    for name, value in CANARIES.items():
        assert _saw(sim, value), f"the simulator never saw {name} in a request"
    assert _saw(sim, f"SUB={WEIBO_SUB}; SUBP={WEIBO_SUBP}")  # the Weibo cookie went whole, too
    echoed = sim.app.echo.status()["echoed"]
    assert echoed.get("error", 0) >= 5 and echoed.get("redirect", 0) >= 5 and echoed.get("body", 0) >= 10, echoed
    committed = dict(echo_crawl.ledger_rows(
        "SELECT platform, count(*) FROM mc_tasks WHERE state = 'committed' GROUP BY platform"))
    assert {"bilibili", "weibo", "facebook", "urls"} <= set(committed), (committed, echo_crawl.stderr[-3000:])
    assert sum(committed.values()) >= 20, committed
    # The error bodies were read: Bilibili -352, Weibo ok:-100 and "频繁", Graph 190.
    codes = {code for (code,) in echo_crawl.ledger_rows("SELECT platform_code FROM mc_feed_errors")}
    assert {"-352", "-100", "100005", "190/463"} <= codes, codes
    # Media URLs with userinfo were refused, not fetched.
    assert echo_crawl.ledger_rows("SELECT count(*) FROM mc_tasks WHERE error_class = 'disallowed_url'")[0][0] >= 1
    dagster_dbs = {path.name for path in sqlite_files(echo_crawl.home / "dagster_home")}
    assert {"runs.db", "index.db"} <= dagster_dbs and len(dagster_dbs) >= 12, dagster_dbs  # one event log per run
    assert '"logger": "media_crawler.items"' in echo_crawl.stdout


def test_fetch_urls_sent_the_secrets_and_got_them_echoed(echo_fetch):
    sim = echo_fetch.sim
    assert _saw(sim, FB_TOKEN) and _saw(sim, SESSDATA)
    echoed = sim.app.echo.status()["echoed"]
    assert echoed.get("body", 0) >= 2 and echoed.get("redirect", 0) >= 1, echoed  # both feed pages, one redirect
    committed = echo_fetch.ledger_rows("SELECT count(*) FROM mc_tasks WHERE state = 'committed'")[0][0]
    assert committed >= 5, echo_fetch.stderr[-3000:]
    assert '"logger": "media_crawler.items"' in echo_fetch.stdout and "fetch-urls:" in echo_fetch.stderr


# --- no canary anywhere ------------------------------------------------------------------


RUNS = ["echo_crawl", "echo_fetch"]


@pytest.mark.parametrize("run_name", RUNS)
def test_no_canary_in_any_file_under_the_home(run_name, request):
    run = request.getfixturevalue(run_name)
    leaks = leaks_in_files(run.home)
    assert not leaks, report(leaks)


@pytest.mark.parametrize("run_name", RUNS)
def test_no_canary_in_any_database_dump(run_name, request):
    run = request.getfixturevalue(run_name)
    assert sqlite_files(run.home)
    leaks = leaks_in_databases(run.home)
    assert not leaks, report(leaks)


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
@pytest.mark.parametrize("run_name", RUNS)
def test_no_canary_on_the_output(run_name, stream, request):
    run = request.getfixturevalue(run_name)
    leaks = leaks_in_text(getattr(run, stream), f"{stream} of {run_name}")
    assert not leaks, report(leaks)


@pytest.mark.parametrize("report_args", [("failures", "--since", "7d"), ("failures", "--since", "7d", "--json"),
                                         ("status", "--json"), ("export",)])
def test_no_canary_in_the_reports_read_from_the_echoed_ledger(echo_crawl, report_args):
    """`failures` (text and JSON), `status` and `export` print what the ledger holds: still no canary."""
    env = _environment(echo_crawl.home, DAGSTER_HOME=str(echo_crawl.home / "dagster_home"),
                       MEDIA_CRAWLER_CONFIG=str(echo_crawl.config))
    args = [*report_args, *(["--config", str(echo_crawl.config)] if report_args[0] == "export" else [])]
    done = subprocess.run([str(CLI), *args], env=env, cwd=echo_crawl.home, capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr[-2000:]
    leaks = leaks_in_text(done.stdout + done.stderr, " ".join(report_args))
    assert not leaks, report(leaks)
    assert len(done.stdout.strip().splitlines()) >= (3 if report_args[0] == "export" else 1), done.stdout[:500]

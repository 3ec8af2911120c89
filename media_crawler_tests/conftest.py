"""Shared test fixtures: a simulator, a crawl configuration pointing at it, service gates."""
from __future__ import annotations

import pytest
import yaml

from media_crawler_tests.services import require_service, summary_lines  # noqa: F401 (require_service: re-exported)


def pytest_terminal_summary(terminalreporter) -> None:
    """One line per missing service, binary or package at the end of every run, so a skip
    is never silent (under CI the tests that needed it failed instead)."""
    lines = summary_lines()
    if lines:
        terminalreporter.section("missing services")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def postgres_databases():
    """The session's throwaway databases, dropped together at its end: each DROP DATABASE
    waits for a checkpoint (~2 s on a loaded 2-core machine), and drops issued at once
    share theirs."""
    from media_crawler_tests.postgres import PostgresDatabases

    databases = PostgresDatabases()
    try:
        yield databases
    finally:
        databases.drop_all()


@pytest.fixture(scope="module")
def postgres(request):
    """Fresh PostgreSQL databases on demand (`postgres.create()` gives a URL), dropped at the
    session's end; the module's engines are disposed when it ends."""
    require_service("PostgreSQL", 5432)
    yield request.getfixturevalue("postgres_databases")
    from media_crawler.store.database import dispose_engines

    dispose_engines()


@pytest.fixture(scope="session")
def s3_server():
    """A SeaweedFS S3 server on 127.0.0.1 for the session (media_crawler_tests/seaweedfs.py)."""
    from media_crawler_tests.seaweedfs import start_seaweedfs

    server = start_seaweedfs()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def simulator():
    from media_crawler_sim.server import Simulator

    sim = Simulator(seed=1, port=0)
    sim.start()
    yield sim
    sim.stop()


@pytest.fixture
def crawl_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("MEDIA_CRAWLER_HOME", str(home))
    monkeypatch.delenv("MEDIA_CRAWLER_LEDGER_URL", raising=False)
    monkeypatch.setenv("FB_ACCESS_TOKEN", "test-token-FAKE9f8e7d6c")
    from media_crawler.store.database import dispose_engines

    yield home
    dispose_engines()


@pytest.fixture
def demo_config(crawl_home, simulator):
    """A sources.yaml for the demo sources, pointed at the session's simulator."""
    from media_crawler_sim.sources import demo_sources

    path = crawl_home / "sources.yaml"
    crawl_home.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(demo_sources(simulator.base_url)))
    return path


def without_rate_waits(data: dict) -> dict:
    """Every platform's request budget raised past anything a test crawl asks (the demo's
    are 3-5 requests a second): for the tests whose claim is not about the budget
    (download/test_ratebudget.py and the rate-limit tests are)."""
    from media_crawler.platforms.registry import names as platform_names

    for platform in platform_names():
        data.setdefault("platforms", {}).setdefault(platform, {}).update(rate=1000, burst=1000)
    return data


def write_config(home, simulator, sources: list[dict], rate_waits: bool = True, **settings):
    """sources.yaml for `sources` on the simulator, with the demo's settings (its request
    budgets too, unless rate_waits=False) and these top-level settings."""
    from media_crawler_sim.sources import demo_sources

    data = demo_sources(simulator.base_url)
    data["sources"] = sources
    data.update(settings)
    if not rate_waits:
        without_rate_waits(data)
    home.mkdir(parents=True, exist_ok=True)
    path = home / "sources.yaml"
    path.write_text(yaml.safe_dump(data))
    return path

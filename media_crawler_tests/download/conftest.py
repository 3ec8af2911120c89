"""Fixtures for the download tests: a scripted local server, a session, a staging path."""
from __future__ import annotations

import pytest

from media_crawler.sessions import make_session
from media_crawler_tests.download.httpserver import ScriptedServer


@pytest.fixture
def server():
    with ScriptedServer() as running:
        yield running


@pytest.fixture
def session():
    with make_session(pool_size=4) as http_session:
        yield http_session


@pytest.fixture
def part(tmp_path):
    return tmp_path / "staging" / "item-1.part"

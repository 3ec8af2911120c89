"""Registering the example platform the way an installed distribution would: a
`*.dist-info` with an `entry_points.txt`, on sys.path, and the registry cache cleared."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

import pytest

# The platform for the crawler, its part for the simulator: one entry point each.
ENTRY_POINTS = ("[media_crawler.platforms]\nexample = media_crawler_tests.fourth_platform:SPEC\n\n"
                "[media_crawler_sim.platforms]\nexample = media_crawler_tests.fourth_platform.sim:PART\n")
METADATA = "Metadata-Version: 2.1\nName: media-crawler-example-platform\nVersion: 0.1\n"
FIXTURES = Path(__file__).parent / "fixtures"


@contextlib.contextmanager
def register_example(root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from media_crawler.platforms.registry import clear_cache

    dist_info = root / "media_crawler_example_platform-0.1.dist-info"
    dist_info.mkdir(parents=True, exist_ok=True)
    (dist_info / "entry_points.txt").write_text(ENTRY_POINTS)
    (dist_info / "METADATA").write_text(METADATA)
    with monkeypatch.context() as patch:
        patch.syspath_prepend(str(root))
        clear_cache()
        try:
            yield
        finally:
            clear_cache()
    clear_cache()  # sys.path is restored: forget the example again


@pytest.fixture
def example_registered(tmp_path, monkeypatch):
    with register_example(tmp_path / "site", monkeypatch):
        yield

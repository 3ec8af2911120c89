"""Where the simulator finds a platform's part: its own entry-point group, keyed by
platform name (media_crawler_sim/parts.py), with the built-in four's entries also in
a table for an editable install made before the group existed."""
from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from media_crawler.platforms.registry import names
from media_crawler_sim import builtin
from media_crawler_sim.parts import BUILTIN, ENTRY_POINT_GROUP, SimulatorPartError, part_for, simulator_parts

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def add_distribution(site: Path, monkeypatch, entry_points: str) -> None:
    """An installed distribution, as importlib.metadata finds one: a dist-info on sys.path."""
    dist_info = site / "media_crawler_sim_plugin-0.1.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: media-crawler-sim-plugin\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{entry_points}\n")
    monkeypatch.syspath_prepend(str(site))


def test_the_declared_entry_points_are_the_built_in_table():
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"][ENTRY_POINT_GROUP]
    assert declared == BUILTIN


def test_every_built_in_platform_has_its_part_in_registry_order():
    assert tuple(simulator_parts()) == names()
    assert part_for("bilibili") is builtin.BILIBILI and part_for("urls") is builtin.URLS
    assert part_for("instagram") is None


def test_a_part_for_an_unregistered_platform_is_not_mounted(tmp_path, monkeypatch):
    add_distribution(tmp_path, monkeypatch, "instagram = media_crawler_sim.builtin:URLS")
    assert tuple(simulator_parts()) == names()


def test_two_parts_for_one_platform_are_refused_in_one_line(tmp_path, monkeypatch):
    add_distribution(tmp_path, monkeypatch, "urls = media_crawler_sim.no_such_module:PART")
    with pytest.raises(SimulatorPartError, match=r"^platform 'urls' has two simulator parts: "
                                                 r"media_crawler_sim.builtin:URLS, media_crawler_sim.no_such_module:PART$"):
        simulator_parts()


@pytest.mark.parametrize("value, error", [
    ("media_crawler_sim.no_such_module:PART", "cannot be loaded: ModuleNotFoundError: "),
    ("media_crawler_sim.builtin:DEMO_TOKEN_ENV", "is not a SimulatorPart$"),
])
def test_a_bad_entry_point_is_named_in_one_line(tmp_path, monkeypatch, value, error):
    from media_crawler.platforms import registry

    add_distribution(tmp_path, monkeypatch, f"example = {value}")
    monkeypatch.setattr(registry, "names", lambda: ("bilibili", "example"))
    with pytest.raises(SimulatorPartError, match=rf"^simulator entry point example = {value} {error}"):
        simulator_parts()

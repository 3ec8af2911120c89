"""The registry's quick look for third-party platforms (registry._group_may_be_named): it
may answer "maybe" too often, never "no" when importlib.metadata would find a plug-in."""
from __future__ import annotations

import zipfile
from importlib.metadata import entry_points

import pytest

from media_crawler.platforms import registry

PLUGIN = "[media_crawler.platforms]\nextra = mc_extra:SPEC\n"


def test_no_is_said_only_when_importlib_metadata_finds_no_plug_in():
    assert registry._group_may_be_named() or not entry_points(group=registry.ENTRY_POINT_GROUP)


@pytest.mark.parametrize("folder, metadata", [("mc_extra-1.0.dist-info", "METADATA"),
                                              ("mc_extra.egg-info", "PKG-INFO")])
def test_an_installed_distribution_naming_the_group_is_seen(tmp_path, monkeypatch, folder, metadata):
    info = tmp_path / folder
    info.mkdir()
    (info / metadata).write_text("Metadata-Version: 2.1\nName: mc-extra\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert registry._group_may_be_named()
    assert [point.name for point in registry.plugin_entry_points()] == ["extra"]


def test_a_zip_on_sys_path_is_left_to_importlib_metadata(tmp_path, monkeypatch):
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("mc_extra-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: mc-extra\nVersion: 1.0\n")
        zipped.writestr("mc_extra-1.0.dist-info/entry_points.txt", PLUGIN)
    monkeypatch.syspath_prepend(str(archive))
    assert registry._group_may_be_named()
    assert [point.name for point in registry.plugin_entry_points()] == ["extra"]

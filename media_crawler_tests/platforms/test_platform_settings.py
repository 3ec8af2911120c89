"""Platform-specific keys live in the owning platform's settings schema (PlatformSpec.settings):
parsed with their types and defaults there, refused in one line for any other platform."""
from __future__ import annotations

import pytest

from media_crawler.config import PLATFORM_KEYS, ConfigError, config_from_dict
from media_crawler.platform_spec import PlatformSettings
from media_crawler.platforms.registry import spec_for, specs

OWN = {"max_height", "codec_order", "mux"}


def test_quality_codec_and_mux_keys_are_no_longer_shared():
    assert not OWN & PLATFORM_KEYS
    owners = {key: sorted(name for name, spec in specs().items() if key in {s.name for s in spec.settings})
              for key in OWN}
    assert owners == {"max_height": ["bilibili", "weibo"], "codec_order": ["bilibili"], "mux": ["bilibili"]}


def test_the_owner_parses_them_with_their_types_and_defaults():
    defaults = config_from_dict({})
    assert defaults.settings_for("bilibili").options == {"max_height": 1080, "codec_order": ("avc", "hevc", "av1"),
                                                         "mux": True}
    assert defaults.settings_for("weibo").options == {"max_height": 1080}
    assert defaults.settings_for("facebook").options == {}
    set_ = config_from_dict({"platforms": {"bilibili": {"max_height": 720, "codec_order": ["hevc"], "mux": False},
                                           "weibo": {"max_height": 480}}})
    assert set_.settings_for("bilibili").options == {"max_height": 720, "codec_order": ("hevc",), "mux": False}
    assert spec_for("weibo").setting(set_.settings_for("weibo"), "max_height") == 480
    assert spec_for("bilibili").setting(PlatformSettings(), "codec_order") == ("avc", "hevc", "av1"), "unset: default"
    with pytest.raises(ConfigError, match=r"^platforms\.bilibili\.max_height must be a whole number of at least 1"):
        config_from_dict({"platforms": {"bilibili": {"max_height": 0}}})
    with pytest.raises(ConfigError, match=r"^platforms\.bilibili\.codec_order must be a list of names"):
        config_from_dict({"platforms": {"bilibili": {"codec_order": "avc"}}})


@pytest.mark.parametrize(("platform", "key", "value", "owners"), [
    ("facebook", "max_height", 720, "bilibili and weibo"),
    ("weibo", "codec_order", ["avc"], "bilibili"),
    ("urls", "mux", False, "bilibili"),
])
def test_a_key_given_to_a_platform_that_does_not_own_it_is_refused_in_one_line(tmp_path, platform, key, value, owners):
    path = tmp_path / "sources.yaml"
    with pytest.raises(ConfigError) as refused:
        config_from_dict({"platforms": {platform: {key: value}}}, path=path)
    assert str(refused.value) == (f"{path}: unknown key {key!r} in platforms.{platform}: "
                                  f"{key} is a setting of {owners}, not of {platform}")


def test_a_key_no_platform_owns_is_still_refused_with_the_known_keys():
    with pytest.raises(ConfigError, match=r"unknown key 'max_width' in platforms\.weibo \(known: .*max_height"):
        config_from_dict({"platforms": {"weibo": {"max_width": 720}}})

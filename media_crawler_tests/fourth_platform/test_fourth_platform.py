"""The example platform registered through its entry point only: the registry lists it,
and everything that lists platforms (config, shards, rates, normalize) knows it."""
from __future__ import annotations

import pytest

from media_crawler.config import ConfigError, config_from_dict
from media_crawler.platform_spec import CONSERVATIVE_RATE
from media_crawler.platforms import registry
from media_crawler_tests.fourth_platform.support import example_registered  # noqa: F401 - a fixture


def test_unregistered_without_its_dist_info():
    assert "example" not in registry.names()
    with pytest.raises(ConfigError, match=r"^source entry .* must name exactly one of bilibili, weibo, facebook, urls$"):
        config_from_dict({"sources": [{"example": "album 7"}]})


def test_the_entry_point_registers_it_after_the_built_in_four(example_registered):
    assert registry.names() == ("bilibili", "weibo", "facebook", "urls", "example")
    assert type(registry.build_adapter("example", config_from_dict({}).settings_for("example"), None)).__name__ == \
        "ExampleAdapter"


def test_config_parses_its_sources_and_its_own_typed_settings(example_registered):
    config = config_from_dict({"platforms": {"example": {"page_size": 4, "rate": 2}},
                               "sources": [{"example": "album 7"}, {"example": "12"}]})
    assert [source.key for source in config.sources] == ["example-7", "example-12"]
    assert [source.kind for source in config.sources] == ["album", "album"]
    assert config.settings_for("example").options == {"page_size": 4, "rate": 2.0}
    assert config_from_dict({}).settings_for("example").options == {"page_size": 3}  # its default
    with pytest.raises(ConfigError, match="unknown key 'per_page' in platforms.example"):
        config_from_dict({"platforms": {"example": {"per_page": 4}}})
    with pytest.raises(ConfigError, match="platforms.example.page_size must be a whole number of at least 1"):
        config_from_dict({"platforms": {"example": {"page_size": 0}}})
    with pytest.raises(ConfigError, match="unknown key 'page_size' in platforms.bilibili"):
        config_from_dict({"platforms": {"bilibili": {"page_size": 4}}})  # its key is its own
    with pytest.raises(ConfigError, match="the kind must be one of album"):
        config_from_dict({"sources": [{"example": "user 7"}]})


def test_shards_rates_and_normalize_derive_from_the_registry(example_registered, capsys):
    from media_crawler.pipeline.runtime import default_rates
    from media_crawler.platforms.normalize_cli import run_normalize
    from media_crawler.shards import PartitionLayout, is_shard_key
    from media_crawler_tests.fourth_platform.support import FIXTURES

    assert PartitionLayout().shard_count("example") == 16 and is_shard_key("example-s03")
    assert "example-s00" in config_from_dict({"partitions": {"shards": 2}}).layout.shard_keys()
    assert default_rates()["example"] == CONSERVATIVE_RATE  # no rate of its own: never unthrottled
    assert "urls" not in default_rates()  # unlimited by the urls spec's own explicit setting
    assert run_normalize("example", [str(FIXTURES / "album_page_ok.json")]) == 0
    assert capsys.readouterr().out.count('"platform": "example"') == 2
    assert run_normalize("example", [str(FIXTURES / "error_throttled.json")]) == 1
    assert '"error_class": "rate_limited"' in capsys.readouterr().out

"""Mux with a bucket as the store (SeaweedFS): the commit stage lends each DASH group's
tracks to ffmpeg as temporary local files and uploads the muxed MP4 as one more object;
nothing is left in the local staging folder, and a re-run muxes nothing."""
from __future__ import annotations

import yaml

from media_crawler.commands.crawl import crawl
from media_crawler.pipeline.runtime import Runtime
from media_crawler.store.ledger import COMMITTED
from media_crawler_tests.pipeline.test_mux_tracks import (  # noqa: F401 (instance: a fixture)
    COPYING_FFMPEG, FREE_BOX, bilibili_config, crawl_every_day, dash_groups, ffmpeg_on_path, instance,
)
from media_crawler.store.ledger import Ledger


def test_dash_groups_are_muxed_from_and_into_a_bucket(crawl_home, simulator, instance, s3_server,  # noqa: F811
                                                      tmp_path, monkeypatch):
    for name, value in s3_server.environment.items():
        monkeypatch.setenv(name, value)
    calls = ffmpeg_on_path(tmp_path, monkeypatch, COPYING_FFMPEG)
    path = bilibili_config(crawl_home, simulator)
    data = yaml.safe_load(path.read_text())
    data["store"] = s3_server.new_uri()
    path.write_text(yaml.safe_dump(data))
    days, config = crawl_every_day(path, simulator, instance)
    groups = dash_groups(Ledger(config.ledger_url))
    assert groups and config.store_url
    store = Runtime.from_config(config).store
    for group in groups.values():
        video, muxed = group["video"], group["mux"]
        assert muxed.state == COMMITTED
        with store.open(muxed.sha256) as muxed_bytes, store.open(video.sha256) as video_bytes:
            assert muxed_bytes.read() == video_bytes.read() + FREE_BOX
    assert len(calls.read_text().splitlines()) == len(groups)
    assert not list((config.store_root / "staging").iterdir()), "no staged file, no lent copy left"
    assert not (config.store_root / "sha256").exists()

    again = crawl(path, days, instance=instance)
    assert not again.failed
    assert len(calls.read_text().splitlines()) == len(groups)

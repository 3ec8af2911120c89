"""The commit stage muxes each DASH group's committed tracks into one more blob
(ffmpeg on PATH, muxing on); without ffmpeg, or when it fails, the partition
still succeeds and the tracks are untouched."""
from __future__ import annotations

import stat
from datetime import date

import pytest
import requests
import yaml
from dagster import DagsterInstance

from media_crawler.commands.crawl import crawl
from media_crawler.config import load_config
from media_crawler.models import DayWindow
from media_crawler.pipeline.mux_tracks import mux_partition
from media_crawler.pipeline.report import StageReport
from media_crawler.pipeline.runtime import Runtime
from media_crawler.store.ledger import COMMITTED, MUX_VARIANT, Ledger
from media_crawler_tests.conftest import write_config

# A stand-in for ffmpeg that counts its calls and "muxes" by writing the video
# track (an MP4 with a moov box, which the verifier accepts) plus one `free` box
# to the last argument: a valid MP4 whose bytes are not the track's.
FREE_BOX = b"\x00\x00\x00\x10freemuxed!!!"
COPYING_FFMPEG = r"""#!/bin/sh
echo call >> "$(dirname "$0")/calls"
video=""
while [ $# -gt 1 ]; do
  if [ "$1" = "-i" ] && [ -z "$video" ]; then video="$2"; fi
  shift
done
cat "$video" > "$1"
printf '\000\000\000\020freemuxed!!!' >> "$1"
"""
FAILING_FFMPEG = """#!/bin/sh
echo call >> "$(dirname "$0")/calls"
echo "[mp4] dimensions not set" >&2
exit 1
"""


@pytest.fixture
def instance():
    with DagsterInstance.ephemeral() as inst:
        yield inst


def ffmpeg_on_path(tmp_path, monkeypatch, script: str):
    folder = tmp_path / "bin"
    folder.mkdir(parents=True)
    ffmpeg = folder / "ffmpeg"
    ffmpeg.write_text(script)
    ffmpeg.chmod(ffmpeg.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    return folder / "calls"


def bilibili_config(crawl_home, simulator, mux: bool = True):
    path = write_config(crawl_home, simulator, [{"bilibili": "user 12345"}], rate_waits=False)
    data = yaml.safe_load(path.read_text())
    data["platforms"]["bilibili"]["mux"] = mux
    path.write_text(yaml.safe_dump(data))
    return path


def crawl_every_day(path, simulator, instance):
    """Crawl the simulator's days; the partitions must all succeed. Returns (days, config)."""
    days = requests.get(f"{simulator.base_url}/_sim/truth", timeout=5).json()["days"]
    outcome = crawl(path, days, instance=instance)
    assert not outcome.failed, [(p.source_key, p.day, p.error) for p in outcome.failed]
    return days, load_config(path)


def crawl_bilibili(crawl_home, simulator, instance):
    """The simulator's Bilibili user, every day, mux on: (config path, days, config, DASH groups)."""
    path = bilibili_config(crawl_home, simulator)
    days, config = crawl_every_day(path, simulator, instance)
    groups = dash_groups(Ledger(config.ledger_url))
    assert groups, "the simulator's bilibili user has DASH videos"
    return path, days, config, groups


def dash_groups(ledger: Ledger) -> dict[str, dict[str, object]]:
    groups: dict[str, dict[str, object]] = {}
    for task in ledger.tasks():
        if task.variant == MUX_VARIANT or task.variant.startswith(("video-", "audio-")):
            groups.setdefault(task.item_id, {})[task.variant.split("-")[0]] = task
    return groups


def test_each_dash_group_gets_one_committed_muxed_blob_and_a_rerun_muxes_nothing(
        crawl_home, simulator, instance, tmp_path, monkeypatch):
    calls = ffmpeg_on_path(tmp_path, monkeypatch, COPYING_FFMPEG)
    path, days, config, groups = crawl_bilibili(crawl_home, simulator, instance)
    store = Runtime.from_config(config).store
    for item_id, group in groups.items():
        video, audio, muxed = group["video"], group["audio"], group["mux"]
        assert muxed.state == COMMITTED and muxed.kind == "video" and muxed.group_key == video.group_key
        assert muxed.meta["muxed_from"] == [video.variant, audio.variant]
        assert (muxed.meta["video_sha256"], muxed.meta["audio_sha256"]) == (video.sha256, audio.sha256)
        assert muxed.canonical_url.endswith("#mux")
        assert store.path_for(muxed.sha256).read_bytes() == store.path_for(video.sha256).read_bytes() + FREE_BOX
    assert len(calls.read_text().splitlines()) == len(groups)
    assert not list((config.store_root / "staging").glob("*.part"))

    again = crawl(path, days, instance=instance)
    assert not again.failed
    assert len(calls.read_text().splitlines()) == len(groups)  # nothing muxed twice


def test_a_lost_muxed_blob_is_made_again_from_the_tracks_not_downloaded(
        crawl_home, simulator, instance, tmp_path, monkeypatch):
    from media_crawler.recovery.reconcile import reconcile

    calls = ffmpeg_on_path(tmp_path, monkeypatch, COPYING_FFMPEG)
    path, days, config, groups = crawl_bilibili(crawl_home, simulator, instance)
    runtime = Runtime.from_config(config)
    lost = next(iter(groups.values()))["mux"]
    runtime.store.path_for(lost.sha256).unlink()

    report = reconcile(runtime.ledger, runtime.store, repair=True)
    assert [f.kind for f in report.findings if f.subject == f"t_{lost.id}"] == ["missing_blob"]
    after = dash_groups(runtime.ledger)
    assert "mux" not in after[lost.item_id]  # dropped, not queued for a download
    assert after[lost.item_id]["video"].state == after[lost.item_id]["audio"].state == COMMITTED

    crawl_every_day(path, simulator, instance)
    remade = dash_groups(runtime.ledger)[lost.item_id]["mux"]
    assert remade.state == COMMITTED and remade.sha256 == lost.sha256 and runtime.store.exists(lost.sha256)
    assert len(calls.read_text().splitlines()) == len(groups) + 1


def test_an_ffmpeg_that_fails_leaves_the_partition_green_and_is_tried_on_the_next_run(
        crawl_home, simulator, instance, tmp_path, monkeypatch):
    calls = ffmpeg_on_path(tmp_path, monkeypatch, FAILING_FFMPEG)
    path, days, config, groups = crawl_bilibili(crawl_home, simulator, instance)
    assert not any("mux" in group for group in groups.values())
    assert all(group["video"].state == group["audio"].state == COMMITTED for group in groups.values())
    tried = len(calls.read_text().splitlines())
    assert tried == len(groups)
    assert not list((config.store_root / "staging").glob("*"))  # no .part, no temporary

    crawl(path, days, instance=instance)
    assert len(calls.read_text().splitlines()) == 2 * tried


def test_a_store_short_of_space_is_not_muxed_into(crawl_home, simulator, instance, tmp_path, monkeypatch):
    calls = ffmpeg_on_path(tmp_path, monkeypatch, FAILING_FFMPEG)
    path = bilibili_config(crawl_home, simulator)
    _days, config = crawl_every_day(path, simulator, instance)  # tracks committed; the mux failed
    calls = ffmpeg_on_path(tmp_path / "second", monkeypatch, COPYING_FFMPEG)
    runtime = Runtime.from_config(config)
    video = next(t for t in runtime.ledger.tasks() if t.variant.startswith("video-"))
    monkeypatch.setattr(type(runtime.store), "free_bytes", lambda store: config.min_free_bytes + (video.size or 0))
    report = StageReport("commit")
    mux_partition(runtime, config.sources[0], DayWindow(date.fromisoformat(video.day)), report)
    assert report.extra["items_muxed"] == 0 and report.extra["mux_failed"] >= 1
    assert not calls.exists()  # ffmpeg never started


def test_a_track_lost_from_the_store_fails_its_group_not_the_partition(
        crawl_home, simulator, instance, tmp_path, monkeypatch):
    ffmpeg_on_path(tmp_path, monkeypatch, FAILING_FFMPEG)
    path = bilibili_config(crawl_home, simulator)
    _days, config = crawl_every_day(path, simulator, instance)  # tracks committed; the mux failed
    calls = ffmpeg_on_path(tmp_path / "second", monkeypatch, COPYING_FFMPEG)
    runtime = Runtime.from_config(config)
    video = next(t for t in runtime.ledger.tasks() if t.variant.startswith("video-"))
    runtime.store.path_for(video.sha256).unlink()
    report = StageReport("commit")
    mux_partition(runtime, config.sources[0], DayWindow(date.fromisoformat(video.day)), report)
    assert report.extra["mux_failed"] >= 1
    assert not calls.exists() or len(calls.read_text().splitlines()) == report.extra["items_muxed"]


@pytest.mark.parametrize("mux_on, has_ffmpeg, reason", [
    (True, False, "not on PATH"),
    (False, True, "disabled"),
])
def test_muxing_that_cannot_run_is_a_reason_in_the_commit_report(
        crawl_home, simulator, instance, tmp_path, monkeypatch, mux_on, has_ffmpeg, reason):
    if has_ffmpeg:
        calls = ffmpeg_on_path(tmp_path, monkeypatch, COPYING_FFMPEG)
    else:
        monkeypatch.setenv("PATH", str(tmp_path / "no-such-folder"))
    path = bilibili_config(crawl_home, simulator, mux=mux_on)
    _days, config = crawl_every_day(path, simulator, instance)
    assert not any("mux" in group for group in dash_groups(Ledger(config.ledger_url)).values())
    report = StageReport("commit")
    source = config.sources[0]
    day = next(t.day for t in Ledger(config.ledger_url).tasks(source_key=source.key) if t.variant.startswith("video-"))
    mux_partition(Runtime.from_config(config), source, DayWindow(date.fromisoformat(day)), report)
    assert reason in report.extra["mux_unavailable"]
    if has_ffmpeg:
        assert not calls.exists()


def test_the_mux_setting_is_a_boolean_per_platform(tmp_path):
    from media_crawler.config import ConfigError, config_from_dict

    base = {"store": str(tmp_path / "store"), "sources": [{"bilibili": "user 1"}]}
    assert config_from_dict(base).settings_for("bilibili").options["mux"] is True  # on unless turned off
    off = config_from_dict({**base, "platforms": {"bilibili": {"mux": False}}})
    assert off.settings_for("bilibili").options["mux"] is False
    with pytest.raises(ConfigError, match="platforms.bilibili.mux must be true or false"):
        config_from_dict({**base, "platforms": {"bilibili": {"mux": "no"}}})

"""DASH muxing: a missing or disabled ffmpeg is a reason string, not a failure; ffmpeg is called with stream copy."""
from __future__ import annotations

import stat

import pytest

from media_crawler.download import dash
from media_crawler.errors import CrawlError, ErrorClass


def fake_ffmpeg(tmp_path, script: str):
    path = tmp_path / "ffmpeg"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


@pytest.fixture
def tracks(tmp_path):
    video, audio = tmp_path / "video.m4s", tmp_path / "audio.m4s"
    video.write_bytes(b"video-track")
    audio.write_bytes(b"audio-track")
    return video, audio


def test_missing_ffmpeg_is_a_reason_and_mux_returns_false(monkeypatch, tmp_path, tracks):
    monkeypatch.setattr(dash.shutil, "which", lambda name: None)
    assert "not on PATH" in dash.mux_unavailable_reason()
    assert dash.mux(*tracks, tmp_path / "out.mp4") is False
    assert not (tmp_path / "out.mp4").exists()


def test_disabled_muxing_is_a_reason(tmp_path, tracks):
    assert "disabled" in dash.mux_unavailable_reason(enabled=False, ffmpeg="/usr/bin/ffmpeg")
    assert dash.mux(*tracks, tmp_path / "out.mp4", enabled=False, ffmpeg="/usr/bin/ffmpeg") is False


def test_ffmpeg_is_run_with_stream_copy_and_the_output_appears_atomically(tmp_path, tracks):
    # The fake records its arguments and writes the last one (the output path).
    ffmpeg = fake_ffmpeg(tmp_path, f'echo "$@" > {tmp_path}/args\nfor last; do :; done\necho muxed > "$last"\n')
    out = tmp_path / "out.mp4"

    assert dash.mux(*tracks, out, ffmpeg=ffmpeg) is True

    args = (tmp_path / "args").read_text().split()
    assert args[args.index("-c") + 1] == "copy" and str(tracks[0]) in args and str(tracks[1]) in args
    assert out.read_text() == "muxed\n" and not list(tmp_path.glob("*.mux-tmp"))


def test_an_ffmpeg_failure_is_corrupt_media_and_leaves_nothing(tmp_path, tracks):
    ffmpeg = fake_ffmpeg(tmp_path, 'echo "audio.m4s: Invalid data found when processing input" >&2\nexit 1\n')
    out = tmp_path / "out.mp4"

    with pytest.raises(CrawlError) as caught:
        dash.mux(*tracks, out, ffmpeg=ffmpeg)

    assert caught.value.error_class is ErrorClass.CORRUPT_MEDIA and "Invalid data" in caught.value.message
    assert not out.exists() and not list(tmp_path.glob("*.mux-tmp"))

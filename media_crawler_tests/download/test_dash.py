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


# With a real ffmpeg (imageio-ffmpeg's static build, a test dependency): real
# fragmented MP4 tracks, as DASH serves them, made by that ffmpeg.
@pytest.fixture(scope="module")
def real_ffmpeg():
    from media_crawler_tests.real_ffmpeg import ffmpeg_exe

    return ffmpeg_exe()


def _run(ffmpeg: str, *args: str) -> str:
    import subprocess

    done = subprocess.run([ffmpeg, "-nostdin", "-hide_banner", *args], capture_output=True, text=True, check=False)
    return done.stderr + done.stdout


@pytest.fixture
def real_tracks(real_ffmpeg, tmp_path):
    video, audio = tmp_path / "video.m4s", tmp_path / "audio.m4s"
    fragmented = ["-movflags", "frag_keyframe+empty_moov+default_base_moof", "-f", "mp4"]
    _run(real_ffmpeg, "-f", "lavfi", "-i", "testsrc=duration=2:size=96x64:rate=10", "-c:v", "mpeg4", *fragmented, str(video))
    _run(real_ffmpeg, "-f", "lavfi", "-i", "sine=frequency=440:duration=2", "-c:a", "aac", *fragmented, str(audio))
    assert video.stat().st_size > 0 and audio.stat().st_size > 0
    return video, audio


def _packet_hashes(ffmpeg: str, path, stream: str) -> list[str]:
    """The md5 of every packet of one stream, copied out without decoding."""
    lines = _run(ffmpeg, "-loglevel", "error", "-i", str(path), "-map", f"0:{stream}", "-c", "copy",
                 "-f", "framemd5", "-").splitlines()
    # stream, dts, pts, duration, size, hash[, side data]: the muxer may add side
    # data (the last AAC packet's trim) without touching the packet.
    return [line.split(",")[5].strip() for line in lines if line and not line.startswith("#")]


def test_a_real_ffmpeg_muxes_dash_tracks_by_stream_copy_into_a_verified_mp4(real_ffmpeg, real_tracks, tmp_path):
    from media_crawler.verify.verify import verify_file

    out = tmp_path / "muxed.part"
    assert dash.mux(*real_tracks, out, ffmpeg=real_ffmpeg) is True
    assert verify_file(out, kind="video").media_type == "video/mp4"
    described = _run(real_ffmpeg, "-i", str(out))
    assert "Video: mpeg4" in described and "Audio: aac" in described
    # Stream copy: the packets are the tracks' own bytes, not a new encoding.
    video, audio = real_tracks
    assert _packet_hashes(real_ffmpeg, out, "v") == _packet_hashes(real_ffmpeg, video, "v") != []
    assert _packet_hashes(real_ffmpeg, out, "a") == _packet_hashes(real_ffmpeg, audio, "a") != []
    # Bitexact: the same tracks give the same bytes, so a mux redone after a crash is stored once.
    again = tmp_path / "again.part"
    dash.mux(*real_tracks, again, ffmpeg=real_ffmpeg)
    assert again.read_bytes() == out.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.part", "audio.m4s", "muxed.part", "video.m4s"]


def test_a_real_ffmpeg_refusing_a_track_is_corrupt_media(real_ffmpeg, real_tracks, tmp_path):
    video, _audio = real_tracks
    not_audio = tmp_path / "audio-html.m4s"
    not_audio.write_bytes(b"<!doctype html><title>login</title>")
    with pytest.raises(CrawlError) as info:
        dash.mux(video, not_audio, tmp_path / "muxed.part", ffmpeg=real_ffmpeg)
    assert info.value.error_class is ErrorClass.CORRUPT_MEDIA
    assert not (tmp_path / "muxed.part").exists() and not list(tmp_path.glob("*mux-tmp*"))

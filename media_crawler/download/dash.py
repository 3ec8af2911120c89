"""Optional DASH muxing: one playable MP4 from a verified video track and audio track.

The tracks themselves are the archive (committed as separate blobs); the muxed
file is a convenience. So a missing ffmpeg or disabled muxing is a reason to
report (`mux_unavailable_reason`), never a failed item. ffmpeg runs with
`-c copy`: streams are copied, never re-encoded, so muxing is fast and lossless.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from media_crawler.errors import CrawlError, ErrorClass

MUX_TIMEOUT_S = 600.0


def find_ffmpeg() -> str | None:
    return shutil.which("ffmpeg")


def mux_unavailable_reason(enabled: bool = True, ffmpeg: str | None = None) -> str | None:
    """Why no muxed file will be made, or None when muxing can run."""
    if not enabled:
        return "DASH muxing is disabled in the settings; video and audio tracks are stored separately"
    if (ffmpeg or find_ffmpeg()) is None:
        return "ffmpeg is not on PATH; video and audio tracks are stored separately (install ffmpeg to also get a muxed MP4)"
    return None


def mux(
    video_path: str | os.PathLike,
    audio_path: str | os.PathLike,
    out_path: str | os.PathLike,
    *,
    enabled: bool = True,
    ffmpeg: str | None = None,
    timeout_s: float = MUX_TIMEOUT_S,
) -> bool:
    """Write `out_path` (video + audio, stream copy). False when muxing is unavailable.

    Raises CrawlError(corrupt_media) when ffmpeg rejects the tracks. The output
    appears atomically: ffmpeg writes a temporary sibling that is renamed on success.
    """
    ffmpeg = ffmpeg or find_ffmpeg()
    if mux_unavailable_reason(enabled, ffmpeg) is not None:
        return False
    out_path = Path(out_path)
    # Same suffix as out_path: a temporary left by a crash in staging is a stale
    # .part that `reconcile` removes.
    temporary = out_path.with_name(f"{out_path.stem}.mux-tmp{out_path.suffix}")
    command = [
        ffmpeg, "-nostdin", "-hide_banner", "-loglevel", "error", "-y",
        "-i", os.fspath(video_path), "-i", os.fspath(audio_path),
        "-map", "0:v:0", "-map", "1:a:0", "-c", "copy",
        # The same tracks make the same bytes (no encoder version string in the
        # file): a mux redone after a crash is stored once.
        "-fflags", "+bitexact",
        "-movflags", "+faststart", "-f", "mp4", os.fspath(temporary),
    ]  # fmt: skip
    try:
        completed = subprocess.run(command, capture_output=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        temporary.unlink(missing_ok=True)
        raise CrawlError(ErrorClass.CORRUPT_MEDIA, f"ffmpeg did not finish muxing within {timeout_s:.0f} s") from None
    if completed.returncode != 0 or not temporary.is_file():
        temporary.unlink(missing_ok=True)
        detail = completed.stderr.decode("utf-8", "replace").strip().splitlines()
        reason = detail[-1] if detail else f"exit status {completed.returncode}"
        raise CrawlError(ErrorClass.CORRUPT_MEDIA, f"ffmpeg could not mux the tracks: {reason}")
    os.replace(temporary, out_path)
    return True

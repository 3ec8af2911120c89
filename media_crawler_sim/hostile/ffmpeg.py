"""A real ffmpeg: imageio-ffmpeg's static build (the test extra, so no apt install of ffmpeg
and its 90 packages), else one on PATH. Used to make real video and, as a decoder the
product does not ship, to judge what the product stored."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

HOW_TO_INSTALL = "the test extra imageio-ffmpeg ships one: pip install -e '.[test]'; or apt install ffmpeg"


def find_ffmpeg() -> str | None:
    """The ffmpeg to use, or None when there is none."""
    try:
        import imageio_ffmpeg

        return imageio_ffmpeg.get_ffmpeg_exe()
    except (ImportError, RuntimeError):  # not installed, or no build for this platform
        return shutil.which("ffmpeg")


def run_ffmpeg(ffmpeg: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([ffmpeg, "-nostdin", "-hide_banner", *args], capture_output=True, text=True,
                          check=False, timeout=120)


def encode_test_video(ffmpeg: str, out: Path, *options: str) -> bytes:
    """One second of ffmpeg's test pattern at 96x64, encoded with `options` (codec, muxer flags)."""
    done = run_ffmpeg(ffmpeg, "-loglevel", "error", "-y", "-f", "lavfi",
                      "-i", "testsrc=duration=1:size=96x64:rate=10", *options, str(out))
    if done.returncode != 0:
        raise RuntimeError(f"ffmpeg could not encode {out.name}: {done.stderr.strip()}")
    return out.read_bytes()


def decodes_cleanly(ffmpeg: str, path: Path) -> bool:
    """Every stream decoded in full by ffmpeg with not one error: -xerror stops at the first
    decode error, and an error it only logs (a Matroska file that ends early) counts too."""
    done = run_ffmpeg(ffmpeg, "-v", "error", "-xerror", "-i", str(path), "-map", "0", "-f", "null", "-")
    return done.returncode == 0 and not done.stderr.strip()

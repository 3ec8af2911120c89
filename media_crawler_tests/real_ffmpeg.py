"""The tests' ffmpeg: media_crawler_sim/hostile/ffmpeg.py's, and when there is none, the
services switch says what is missing (a skip, or a failure in CI)."""
from __future__ import annotations

from media_crawler_sim.hostile.ffmpeg import HOW_TO_INSTALL, find_ffmpeg
from media_crawler_tests.services import require_binary


def ffmpeg_exe() -> str:
    return find_ffmpeg() or require_binary("ffmpeg", HOW_TO_INSTALL)

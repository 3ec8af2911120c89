"""A crawled home to export from, made in-process through the pipeline's stages (no
Dagster: discover, download, verify, commit and the DASH mux, as a partition's run does),
and readers of what an export wrote."""
from __future__ import annotations

import gzip
import io
import os
import sys
import zipfile
from datetime import date
from pathlib import Path

import yaml

from media_crawler.config import load_config
from media_crawler.errors import CrawlError
from media_crawler.models import DayWindow
from media_crawler.pipeline.discover import discover
from media_crawler.pipeline.download import download_partition
from media_crawler.pipeline.mux_tracks import mux_partition
from media_crawler.pipeline.report import StageReport
from media_crawler.pipeline.runtime import Runtime
from media_crawler.pipeline.verify_commit import commit_partition, verify_partition
from media_crawler_sim.sources import demo_sources

WACZ_CLI = Path(sys.executable).with_name("wacz")


def write_home_config(home: Path, base_url: str, sources: list[dict], *, mux: bool = False, **top) -> Path:
    """sources.yaml with the simulator's platform settings, its store and ledger in `home`
    (mux: Bilibili's DASH tracks muxed too, which the demo's settings leave off)."""
    data = demo_sources(base_url)
    if mux:
        data["platforms"]["bilibili"]["mux"] = True
    data.update(sources=sources, store=str(home / "store"), ledger_url=f"sqlite:///{home / 'ledger.db'}", **top)
    home.mkdir(parents=True, exist_ok=True)
    path = home / "sources.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def crawl_days(config_path: Path, days: list[str]) -> Runtime:
    """Every source of the configuration through the four stages (and the mux) for `days`;
    a feed walk that fails (as a partition's would, red) leaves what it found to the others."""
    config = load_config(config_path)
    runtime = Runtime.from_config(config)
    for day in days:
        window = DayWindow(date.fromisoformat(day))
        for source in config.sources:
            try:
                discover(runtime, source, window)
            except CrawlError:  # a page failed (the echo profile's error answers): the rest goes on
                pass
            download_partition(runtime, source, window)
            verify_partition(runtime, source, window)
            commit_partition(runtime, source, window)
            mux_partition(runtime, source, window, StageReport("commit"))
    return runtime


def ffmpeg_on_path(folder: Path) -> str:
    """A PATH whose `ffmpeg` is test_mux_tracks.py's stand-in (the simulator's DASH tracks
    are no real media a real ffmpeg would mux): it writes a valid MP4 of its own."""
    from media_crawler_tests.pipeline.test_mux_tracks import COPYING_FFMPEG

    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "ffmpeg"
    script.write_text(COPYING_FFMPEG)
    script.chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"


def wacz_members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as package:
        return {name: package.read(name) for name in package.namelist()}


def unpacked_bytes(path: Path) -> dict[str, bytes]:
    """Every member of the WACZ as a reader sees it: the WARC's gzip members decompressed."""
    members = wacz_members(path)
    return {name: gzip.decompress(data) if name.endswith(".gz") else data for name, data in members.items()}


def warc_records(path: Path) -> list[dict]:
    """Every record of the WACZ's WARC, read by warcio with its digest checks on: type,
    headers, HTTP status and headers, payload bytes."""
    from warcio.archiveiterator import ArchiveIterator

    records = []
    stream = io.BytesIO(wacz_members(path)["archive/data.warc.gz"])
    for record in ArchiveIterator(stream, check_digests="raise"):
        http = record.http_headers
        records.append({
            "type": record.rec_type, "headers": dict(record.rec_headers.headers),
            "status": http.get_statuscode() if http is not None else None,
            "http": dict(http.headers) if http is not None else {},
            "payload": record.content_stream().read(),
        })
    return records

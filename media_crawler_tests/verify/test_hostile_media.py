"""The hostile-media corpus end to end: fetched by `fetch-urls` (a subprocess)
and by a Dagster `crawl`, with and without announced hashes, plus answers that lie
about their size and a gzip bomb: 0 committed blobs that fail an independent full decode,
0 tracebacks, 0 staging leftovers (fetch-urls's peak RSS on it: bench/limits.py)."""
from __future__ import annotations

import io
import os
import sqlite3
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml
from PIL import Image

from media_crawler_sim.hostile.corpus import media_corpus, real_videos
from media_crawler_sim.hostile.ffmpeg import decodes_cleanly
from media_crawler_sim.hostile.server import HostileServer
from media_crawler_tests.real_ffmpeg import ffmpeg_exe

MEDIA_BIN = Path(sys.executable).with_name("media-crawler")


@pytest.fixture(scope="module")
def ffmpeg() -> str:
    return ffmpeg_exe()


@pytest.fixture(scope="module")
def corpus(ffmpeg, tmp_path_factory) -> dict[str, tuple[bytes, str, str]]:
    videos = real_videos(ffmpeg, tmp_path_factory.mktemp("videos"))
    return {name: (data, kind, verdict) for name, data, kind, verdict in media_corpus(videos)}


@pytest.fixture(scope="module")
def hostile_server(corpus):
    with HostileServer(corpus) as server:
        yield server


def fully_decodes(path: Path, ffmpeg: str) -> bool:
    """An independent full decode, by decoders the product does not use for it: a video's
    every frame by ffmpeg, an image's every frame at full size by Pillow (no draft)."""
    head = path.read_bytes()[:16]
    if head[4:8] in (b"ftyp", b"styp", b"moof", b"sidx") or head.startswith(b"\x1a\x45\xdf\xa3"):
        return decodes_cleanly(ffmpeg, path)
    try:
        with Image.open(io.BytesIO(path.read_bytes())) as image:
            for index in range(getattr(image, "n_frames", 1)):
                image.seek(index)
                image.load()
        return True
    except Exception:  # noqa: BLE001 - any failure is the answer
        return False


def committed(store: Path, ledger: Path) -> dict[str, str]:
    with sqlite3.connect(ledger) as conn:
        rows = conn.execute("SELECT media_url, sha256 FROM mc_tasks WHERE state = 'committed'").fetchall()
    return {url.rsplit("/", 1)[-1]: sha for url, sha in rows}


def check_store(store: Path, ledger: Path, output: str, corpus: dict, ffmpeg: str) -> None:
    stored = committed(store, ledger)
    blobs = [path for path in (store / "sha256").rglob("*") if path.is_file()]
    undecodable = [path.name for path in blobs if not fully_decodes(path, ffmpeg)]
    assert blobs and undecodable == []
    wrongly = {name for name in stored if name not in corpus or corpus[name][2] == "refuse"}
    assert wrongly == set(), wrongly
    genuine = {name for name, (_d, _k, verdict) in corpus.items() if verdict == "store"}
    assert genuine <= set(stored), genuine - set(stored)  # the corpus is not refused wholesale
    leftovers = [p for p in (store / "staging").rglob("*") if p.is_file()] if (store / "staging").exists() else []
    assert leftovers == []
    assert "Traceback" not in output


def run_fetch_urls(url: str, store: Path, tmp_path: Path) -> tuple[str, str]:
    """`fetch-urls` over the feed in a process of its own; (stdout, stderr).
    Its peak RSS on this corpus is bench/limits.py's (hostile_fetch_rss)."""
    done = subprocess.run(
        [str(MEDIA_BIN), "fetch-urls", "--feed", url, "--store", str(store), "--allow-host", url,
         "--processes", "1", "--workers", "4", "--max-item-bytes", str(64 * 1024**2)],
        env={**os.environ, "MEDIA_CRAWLER_HOME": str(tmp_path)}, capture_output=True, text=True, timeout=240)
    return done.stdout, done.stderr


@pytest.mark.parametrize("with_hashes", [False, True], ids=["no_hashes", "announced_hashes"])
def test_fetch_urls_stores_only_media_that_decodes(hostile_server, ffmpeg, tmp_path, with_hashes):
    store = tmp_path / "store"
    url = hostile_server.feed(f"fetch-{with_hashes}", with_hashes)
    out, err = run_fetch_urls(url, store, tmp_path)
    check_store(store, store / "ledger.db", out + err, hostile_server.corpus, ffmpeg)
    assert "fetch-urls:" in err


def test_a_dagster_crawl_stores_only_media_that_decodes(hostile_server, ffmpeg, tmp_path, monkeypatch):
    from dagster import DagsterInstance

    from media_crawler.commands.crawl import crawl
    from media_crawler.defs import assets

    monkeypatch.setattr(assets, "DOWNLOAD_RETRY_WAIT_S", 0.0)  # the step's retries, without 35 s of their waits
    url = hostile_server.feed("crawl", True)
    config = {"sources": [{"urls": url}], "allow_hosts": [url], "store": str(tmp_path / "store"),
              "ledger_url": f"sqlite:///{tmp_path / 'ledger.db'}", "max_item_bytes": 64 * 1024**2}
    path = tmp_path / "sources.yaml"
    path.write_text(yaml.safe_dump(config))
    monkeypatch.setenv("MEDIA_CRAWLER_HOME", str(tmp_path))
    day = datetime.now(timezone.utc).date().isoformat()
    with DagsterInstance.ephemeral() as instance:
        outcome = crawl(path, [day], instance=instance)
    assert outcome.partitions, outcome
    check_store(tmp_path / "store", tmp_path / "ledger.db", "\n".join(p.error for p in outcome.partitions),
                hostile_server.corpus, ffmpeg)

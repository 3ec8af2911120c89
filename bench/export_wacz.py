"""`export --format wacz` of a synthesized crawl: items/s and peak RSS at two sizes (issue 30).

    python -m bench export_wacz [--items 1000 10000] [--blob-bytes 16384] [--workdir /tmp/mc_bench_wacz]

For each size: a SQLite ledger of that many committed items (one in ten repeating an
earlier item's bytes at another URL, so a tenth are revisits) and one kept API answer per
ten items, with their blobs in a filesystem store (distinct seeded bytes, `--blob-bytes`
each), loaded through media_crawler/store/ (bulk_load, the BlobStore protocol,
store/answers.py). Then `media-crawler export --format wacz` runs in a process of its own
under /usr/bin/time -v: its peak RSS (max resident set), CPU time (user + system, which
the other processes on the machine do not skew) and wall time, and items per CPU second.
The claim under test: the peak RSS does not grow with the item count.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from media_crawler.store import bulk_load
from media_crawler.store.answers import KeptAnswer, record_answer, release_mark
from media_crawler.store.ledger import Ledger
from media_crawler.store.open_store import open_answer_store, open_blob_store

ROOT = Path(__file__).resolve().parents[1]
DAY = "2026-11-30"
START = 1796000000.0


def build(home: Path, items: int, blob_bytes: int) -> Path:
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    ledger_url = f"sqlite:///{home / 'ledger.db'}"
    ledger, media = Ledger(ledger_url), open_blob_store(home / "store", create=True)
    answers = open_answer_store(home / "store", create=True)
    rng = random.Random(items)
    digests: list[tuple[str, int]] = []
    with media.deferred_sync():
        for index in range(items):
            if index % 10 == 9:  # the same bytes as an earlier item, at another URL: a revisit
                digests.append(digests[rng.randrange(len(digests))])
                continue
            data = rng.randbytes(blob_bytes)
            digests.append((media.put_stream_if_absent(io.BytesIO(data)).sha256, len(data)))
    rows = []
    for index, (sha256, size) in enumerate(digests):
        url = f"https://cdn.example.com/media/{index:08d}.jpg"
        row = {column: None for column in bulk_load.TASK_COLUMNS}
        row.update(platform="urls", item_id=f"{index:08d}", variant="file", kind="image", source_key="urls-bench",
                   day=DAY, canonical_url=url, media_url=url, state="committed", attempts=1, sha256=sha256,
                   size=size, meta=json.dumps({"title": f"item {index}", "post_url": f"https://example.com/p/{index}"}),
                   finished_at=START + index, committed_at=START + index + 0.5, updated_at=START + index + 0.5,
                   media_response=json.dumps({"status": 200, "content_type": "image/jpeg"}))
        rows.append(row)
    bulk_load.load_tasks(ledger, rows)
    for page in range(items // 10):
        body = json.dumps({"page": page, "items": [f"{page * 10 + i:08d}" for i in range(10)]}).encode()
        mark = release_mark(ledger)
        stored = answers.put_stream_if_absent(io.BytesIO(body))
        assert record_answer(ledger, KeptAnswer(platform="urls", url=f"https://example.com/feed.json?page={page}",
                                                fetched_at=START + page * 10, status=200, reason="OK",
                                                headers=(("Content-Type", "application/json"),),
                                                sha256=stored.sha256, size=stored.size), stored_since=mark)
    config = home / "sources.yaml"
    config.write_text(f"store: {home / 'store'}\nledger_url: {ledger_url}\nsources: []\n")
    return config


def export(config: Path, out: Path) -> dict:
    command = ["/usr/bin/time", "-v", sys.executable, "-m", "media_crawler.cli", "export", "--config", str(config),
               "--format", "wacz", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    wall = time.monotonic() - started
    report = done.stderr

    def field(name: str) -> float:
        return float(re.search(rf"{re.escape(name)}: ([\d.]+)", report).group(1))

    return {"wall_s": round(wall, 2), "cpu_s": round(field("User time (seconds)") + field("System time (seconds)"), 2),
            "peak_rss_mb": round(field("Maximum resident set size (kbytes)") / 1024, 1),
            "wacz_mb": round(out.stat().st_size / 1e6, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench export_wacz", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--blob-bytes", type=int, default=16384)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/mc_bench_wacz"))
    args = parser.parse_args(argv)
    print(f"load average (1 min): {os.getloadavg()[0]:.2f}")
    for items in args.items:
        home = args.workdir / f"items{items}"
        config = build(home, items, args.blob_bytes)
        result = export(config, home / "export.wacz")
        result["items_per_cpu_s"] = round(items / result["cpu_s"]) if result["cpu_s"] else None
        print(json.dumps({"items": items, "answers": items // 10, **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

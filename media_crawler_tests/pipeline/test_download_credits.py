"""The download step's run-ahead credits (pipeline/download.py `_RunAhead`) on the paths that
give none back: a step whose consumer fails ends instead of hanging, and the bodies waiting
for their verification and commit stay bounded by the step's threads, not by the claimed batch."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from datetime import date
from pathlib import Path

import pytest

from media_crawler.config import config_from_dict
from media_crawler.models import DayWindow
from media_crawler.pipeline import download as download_module
from media_crawler.pipeline.discover import discover
from media_crawler.pipeline.download import Workers, download_partition
from media_crawler.pipeline.runtime import Runtime
from media_crawler.pipeline.settle_in_place import verify_and_commit
from media_crawler.platforms.registry import parse_source
from media_crawler.store.database import dispose_engines
from media_crawler_sim.hostile.builders import image_bytes
from media_crawler_tests.download.httpserver import Reply, ScriptedServer

REPO = Path(__file__).resolve().parents[2]


def _list_of_images(server: ScriptedServer, store: Path, count: int, largest: bytes | None = None):
    """A URL list of `count` distinct small PNGs (and `largest` first, when given), discovered."""
    bodies = [image_bytes("PNG", size=(32 + n, 24)) for n in range(count)]
    if largest is not None:
        bodies.insert(0, largest)
    items = []
    for n, body in enumerate(bodies):
        url = server.route(f"/{n}.png", Reply(body, content_type="image/png"))
        items.append({"url": url, "size": len(body)})
    feed = server.route("/feed.json", Reply(json.dumps({"items": items}).encode(), content_type="application/json"))
    config = config_from_dict({"store": str(store), "ledger_url": f"sqlite:///{store / 'ledger.db'}",
                               "allow_hosts": ["127.0.0.1:*"], "sources": [{"urls": feed}]})
    runtime, source = Runtime.from_config(config), parse_source("urls", feed)
    discover(runtime, source, DayWindow(date.today()))
    return runtime, source


def failing_flush_scenario(folder: str) -> None:
    """In a child process (the parent kills it if it hangs): the step's first ledger write
    fails while a download waits for a credit that only a skipped settle would give back.

    One download thread and one wait thread, so two downloads at once at most. The largest
    item commits (two credits back: the next two downloads start, and then both threads wait
    for a credit for the last two); the consumer records it, and its ledger write fails.
    The settle after it waits for that failure, then fails
    itself (one credit back, as a corrupt image gives): of the two downloads waiting, one
    starts, the other waits for a credit. The pool skips the settles not started once its
    consumer is gone, so that credit never comes: without a wake-up at the pool's close,
    the join waits forever and the ledger's error is never raised."""
    with ScriptedServer() as server:
        runtime, source = _list_of_images(server, Path(folder) / "store", 5,
                                          largest=image_bytes("PNG", size=(300, 200)))
        consumer_failed = threading.Event()
        settles = []

        def failing_apply(_changes):
            # Once the next two downloads are out, and their threads wait for credits for the last two.
            for _ in range(400):
                if sum(len(server.requests_to(f"/{n}.png")) for n in range(6)) >= 3:
                    break
                time.sleep(0.05)
            time.sleep(0.3)
            consumer_failed.set()
            raise OSError("disk I/O error")  # what sqlite says of a failing disk

        def settle(item):
            settles.append(item.task.canonical_url)
            if len(settles) == 1:
                return verify_and_commit(runtime, item)
            if len(settles) == 2:
                assert consumer_failed.wait(20)
                time.sleep(0.3)  # the consumer's exception has closed the pool by now
            raise ValueError("verification crashed")

        download_module.FLUSH_EVERY = 1  # the first outcome is written at once
        runtime.ledger.apply = failing_apply
        try:
            download_partition(runtime, source, None, ignore_backoff=True,
                               workers=Workers(1, wait_threads=1, after_download=settle))
        except OSError as error:
            print(f"raised: {error}", flush=True)
        else:
            print("returned", flush=True)


def test_a_failed_ledger_write_ends_the_step_instead_of_hanging(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    code = ("import sys; from media_crawler_tests.pipeline.test_download_credits import failing_flush_scenario; "
            "failing_flush_scenario(sys.argv[1])")
    try:
        child = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, cwd=REPO,
                               capture_output=True, text=True, timeout=45)
    except subprocess.TimeoutExpired:
        pytest.fail("the download step hung after its ledger write failed (a download waits for a credit forever)")
    assert child.returncode == 0, child.stderr[-2000:]
    assert child.stdout.strip().splitlines()[-1] == "raised: disk I/O error"


@pytest.fixture
def server():
    with ScriptedServer() as running:
        yield running
    dispose_engines()


def test_the_bodies_waiting_for_their_settle_are_bounded_by_the_threads(server, tmp_path, monkeypatch):
    """One download thread, verification slower than the downloads (each settle waits until
    no download moves any more, or until the pile is past what the threads explain). The
    bodies kept in memory for verification (DownloadResult.body) that wait for their
    settle stay within twice the step's threads, however many items the batch holds."""
    runtime, source = _list_of_images(server, tmp_path / "store", 24)
    held, worst, lock = [0], [0], threading.Lock()
    real_download = download_module.download_with_retries

    def counting_download(*args, **kwargs):
        result = real_download(*args, **kwargs)
        with lock:
            held[0] += result.body is not None
            worst[0] = max(worst[0], held[0])
        return result

    def settle_slowly(item):
        last, quiet_since = None, time.monotonic()
        while time.monotonic() - quiet_since < 0.1 and held[0] <= 8:
            if held[0] != last:
                last, quiet_since = held[0], time.monotonic()
            time.sleep(0.01)
        try:
            return verify_and_commit(runtime, item)
        finally:
            with lock:
                held[0] -= item.result.body is not None

    monkeypatch.setattr(download_module, "download_with_retries", counting_download)
    report = download_partition(runtime, source, None, ignore_backoff=True,
                                workers=Workers(1, after_download=settle_slowly))
    assert report.extra["items_committed"] == 24 and report.still_unfinished == 0
    assert worst[0] <= 2, f"{worst[0]} downloaded bodies waited for their settle at once with one thread"

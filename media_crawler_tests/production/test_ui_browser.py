"""`make ui` end to end: headless Chromium opens the asset graph, launches one partition from the UI, the run succeeds, Ctrl-C stops every process."""
from __future__ import annotations

import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
import yaml

from media_crawler.deploy.services import REPO_ROOT, group_alive
from media_crawler_tests import services
from media_crawler_tests.production.conftest import assert_store_sound, expected_blobs, free_port
from media_crawler_tests.shard_support import demo_layout

CHROMIUM = Path("/usr/bin/chromium")
# No background networking: this machine refuses Chromium's calls home, many at a time.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage"]
DAY, SOURCE = "2026-11-27", "bilibili-12345"
SHARD = demo_layout().shard_of(SOURCE)  # the partition holding it: the demo's only bilibili source
LEAD_SCREENSHOT = Path("/tmp/mc-ui-screenshot.png")


def require_browser() -> None:
    if not CHROMIUM.exists():
        services.missing("chromium", f"Debian chromium is not installed at {CHROMIUM} (apt-get install -y chromium)")
    services.require_module("playwright.sync_api", "pip install -e '.[test]'")


class UiProcess:
    """`python -m media_crawler.commands.ui` in its own session, and the pids it reports when ready."""

    def __init__(self, home: Path, port: int) -> None:
        env = {k: v for k, v in os.environ.items()
               if k not in ("DAGSTER_HOME", "MEDIA_CRAWLER_HOME", "MEDIA_CRAWLER_CONFIG", "MEDIA_CRAWLER_LEDGER_URL")}
        self.stderr_path = home.parent / "ui.stderr"
        with open(self.stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "media_crawler.commands.ui", "--home", str(home), "--port", str(port),
                 "--sim-port", "0"],
                cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True, start_new_session=True)
        self.child_pids: list[int] = []

    def wait_ready(self, timeout: float = 180.0) -> str:
        selector = selectors.DefaultSelector()
        selector.register(self.process.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if selector.select(timeout=1.0):
                line = self.process.stdout.readline()
                if line.startswith("ready "):
                    self.child_pids = [int(pid) for pid in re.findall(r"_pid=(\d+)", line)]
                    return line.split()[1]
            if self.process.poll() is not None:
                break
        pytest.fail(f"make ui did not become ready:\n{self.stderr_path.read_text()[-3000:]}")

    def interrupt(self, timeout: float = 60.0) -> int:
        """Ctrl-C, as a person at the terminal would."""
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=timeout)

    def kill_everything(self) -> None:
        for pgid in [self.process.pid, *self.child_pids]:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait(timeout=10)


@pytest.fixture
def ui(tmp_path):
    require_browser()
    ui = UiProcess(tmp_path / "home", free_port())
    try:
        yield ui
    finally:
        if ui.process.poll() is None:
            try:
                ui.interrupt()
            except subprocess.TimeoutExpired:
                pass
        ui.kill_everything()  # whatever Ctrl-C left behind (nothing, when the test passes)


def launch_partition_from_the_asset_graph(page, base_url: str, shots: Path) -> str:
    """Materialize all four assets for one partition through the launch dialog; returns the run id."""
    page.goto(f"{base_url}/asset-groups/media_crawl")
    materialize = page.get_by_role("button", name=re.compile(r"Materialize all…$"))
    materialize.wait_for(timeout=60_000)
    page.get_by_text("committed_media").first.wait_for(timeout=60_000)
    page.screenshot(path=str(shots / "asset-graph.png"))
    materialize.click()
    dialog = page.get_by_role("dialog")
    day = dialog.get_by_placeholder(re.compile(r"^ex: "))
    day.fill(DAY)
    day.press("Enter")
    dialog.get_by_text("Select a partition or create one").click()
    page.get_by_role("menuitem", name=re.compile(SHARD)).click()
    page.keyboard.press("Escape")  # closes the shard menu, not the dialog
    launch = dialog.get_by_role("button", name="Launch 1 run")
    with page.expect_response(lambda r: "/graphql" in r.url and "LaunchPipelineExecution" in (r.request.post_data or "")) as answer:
        launch.click()
    return answer.value.json()["data"]["launchPipelineExecution"]["run"]["id"]


def test_make_ui_launches_a_partition_from_the_browser_and_stops_cleanly(ui, tmp_path):
    from playwright.sync_api import sync_playwright

    base_url = ui.wait_ready()
    shots = tmp_path / "screenshots"
    shots.mkdir()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            # A fresh profile shows a "Join the Dagster community" modal that blocks clicks.
            context.add_init_script("window.localStorage.setItem('communityNux', JSON.stringify('1'))")
            page = context.new_page()
            run_id = launch_partition_from_the_asset_graph(page, base_url, shots)
            page.goto(f"{base_url}/runs/{run_id}")
            # The header turns to "Success" live once the daemon has run it.
            page.get_by_text("Success", exact=True).first.wait_for(timeout=240_000)
            page.screenshot(path=str(shots / "run-success.png"))
        finally:
            browser.close()
    shutil.copyfile(shots / "run-success.png", LEAD_SCREENSHOT)

    home = tmp_path / "home"
    config = yaml.safe_load((home / "demo" / "sources.yaml").read_text())
    sim_url = config["platforms"]["bilibili"]["api_base"].rsplit("/", 1)[0]
    truth = requests.get(f"{sim_url}/_sim/truth", timeout=10).json()
    assert_store_sound(home / "store", expected_blobs(truth, {SOURCE}, {DAY}))

    assert ui.interrupt() == 0
    assert ui.child_pids and not any(group_alive(pid) for pid in ui.child_pids), "a process group outlived Ctrl-C"

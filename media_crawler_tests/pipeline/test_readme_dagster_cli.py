"""README.md's generated-world walkthrough, run as written (issue 26, item 6).

Each line of the walkthrough's bash block runs in a fresh directory holding what a
fresh clone holds at its root (dagster.yaml), with no DAGSTER_HOME, MEDIA_CRAWLER_*
or credential in the environment and the project's commands on PATH. The one change:
the simulator listens on a free port instead of 8787 (its sources.yaml names the
port it got). What the walkthrough promises: every command exits 0, the Dagster CLI
line finds the sources without being told, executes in process, retries nothing,
and prints neither the telemetry banner nor a beta note nor a stack trace.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from media_crawler.environment import config_path_default, demo_config_path
from media_crawler.definitions import code_location_layout

REPO = Path(__file__).resolve().parents[2]
WALKTHROUGH = "### A generated world, then the Dagster CLI"
OUR_VARIABLES = ("DAGSTER_HOME", "MEDIA_CRAWLER_CONFIG", "MEDIA_CRAWLER_HOME", "MEDIA_CRAWLER_LEDGER_URL",
                 "MEDIA_CRAWLER_WORKERS", "FB_ACCESS_TOKEN", "BILIBILI_SESSDATA", "WEIBO_COOKIE")


def walkthrough_lines() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index(WALKTHROUGH):]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def clone_environment() -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in OUR_VARIABLES}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def first_line(process: subprocess.Popen, timeout: float) -> str:
    """The first stdout line of a background command (the simulator prints its URL once listening)."""
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    assert got and got[0].strip(), f"no line from the background command: {process.args}"
    return got[0].strip()


def test_the_readme_walkthrough_and_its_dagster_cli_line_work_as_written(tmp_path):
    lines = walkthrough_lines()
    assert any(line.startswith("dagster asset materialize ") for line in lines)
    clone = tmp_path / "clone"
    clone.mkdir()
    shutil.copyfile(REPO / "dagster.yaml", clone / "dagster.yaml")
    env = clone_environment()
    background: list[subprocess.Popen] = []
    outputs: dict[str, subprocess.CompletedProcess] = {}
    try:
        for line in lines:
            tokens = shlex.split(line.replace("--port 8787", "--port 0"), comments=True)
            if tokens[0] == "export":
                name, _, value = tokens[1].partition("=")
                env[name] = value
            elif tokens[-1] == "&":
                process = subprocess.Popen(["bash", "-c", "exec " + shlex.join(tokens[:-1])], cwd=clone, env=env,
                                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                background.append(process)
                assert first_line(process, timeout=60).startswith("http://127.0.0.1:")
            elif tokens == ["kill", "%1"]:
                background[0].terminate()
                assert background[0].wait(timeout=30) == 0
            else:
                done = subprocess.run(["bash", "-c", shlex.join(tokens)], cwd=clone, env=env, capture_output=True,
                                      text=True, timeout=300)
                assert done.returncode == 0, f"{line}\n{done.stderr[-3000:]}"
                outputs[tokens[0] + " " + tokens[1]] = done
    finally:
        for process in background:
            process.kill()
            process.wait()

    crawled = outputs["media-crawler crawl"].stderr
    assert re.findall(r": (ok|FAILED) run", crawled) and "FAILED" not in crawled

    materialized = outputs["dagster asset"]
    events = [json.loads(line) for line in materialized.stdout.splitlines()]  # JSON lines only (python_logs)
    messages = [event.get("msg", "") for event in events]
    assert any("Executing steps in process" in message for message in messages)
    assert not any("multiprocess" in message for message in messages)
    types = [event.get("dagster_event_type") for event in events]
    assert types.count("STEP_SUCCESS") == 4 and "STEP_UP_FOR_RETRY" not in types and "PIPELINE_SUCCESS" in types
    # stderr: only the CLI's own SupersessionWarning (README says why it stays), nothing of ours or Dagster's beta notes.
    stderr = materialized.stderr
    assert "Telemetry" not in stderr and "BetaWarning" not in stderr and "Traceback" not in stderr
    warnings = [line for line in stderr.splitlines() if "Warning" in line]
    assert all("SupersessionWarning" in line for line in warnings), warnings
    assert not list(clone.glob(".tmp_dagster_home_*"))  # Dagster's temporary home is gone


def test_without_a_named_or_local_sources_file_the_demo_one_is_read(tmp_path, monkeypatch):
    for name in ("MEDIA_CRAWLER_CONFIG", "MEDIA_CRAWLER_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    assert config_path_default() == "sources.yaml"  # nothing anywhere: the error will name ./sources.yaml

    demo = demo_config_path("var")
    demo.parent.mkdir(parents=True)
    demo.write_text("partitions: {start_day: 2026-11-20, shards: 2}\nsources: []\n")
    assert config_path_default() == str(demo)  # after `make demo`
    assert [key for key in code_location_layout().shard_keys() if key.startswith("bilibili")] == [
        "bilibili-s00", "bilibili-s01"]
    assert code_location_layout().start_day.isoformat() == "2026-11-20"

    Path("sources.yaml").write_text("sources: []\n")
    assert config_path_default() == "sources.yaml"  # a local one wins
    monkeypatch.setenv("MEDIA_CRAWLER_CONFIG", "/elsewhere/sources.yaml")
    assert config_path_default() == "/elsewhere/sources.yaml"  # the named one wins

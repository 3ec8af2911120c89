"""`dagster asset materialize` as operators run it: stdout holds only JSON lines, ours and Dagster's, with every item key."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import requests
from dagster import DagsterInstance

from media_crawler.commands.crawl import prepare_home
from media_crawler.config import load_config
from media_crawler_sim.app import Behaviour
from media_crawler_sim.server import Simulator
from media_crawler_tests.observe.support import ITEM_LINE_KEYS, TS_PATTERN, write_sources

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "media_crawler" / "instance" / "dagster.yaml"
DAGSTER = Path(sys.executable).with_name("dagster")


def test_the_repository_dagster_yaml_is_the_instance_template():
    assert (REPO / "dagster.yaml").read_bytes() == TEMPLATE.read_bytes()


def test_stdout_of_a_cli_materialization_is_json_lines_only(tmp_path):
    # A simulator of its own: seeded 503s (Retry-After: 1) make some downloads retry, so
    # failure lines are exercised; every item still succeeds within its in-step attempts.
    with Simulator(seed=1, port=0, behaviour=Behaviour(fault_rate=0.3)) as sim:
        day = requests.get(f"{sim.base_url}/_sim/truth", timeout=5).json()["days"][-1]
        config_path = write_sources(tmp_path, sim.base_url, [{"urls": f"{sim.base_url}/urls/demo.json"}])
        dagster_home = tmp_path / "dagster_home"
        dagster_home.mkdir()
        shutil.copyfile(TEMPLATE, dagster_home / "dagster.yaml")
        env = {**os.environ, "DAGSTER_HOME": str(dagster_home), "MEDIA_CRAWLER_HOME": str(tmp_path),
               "MEDIA_CRAWLER_CONFIG": str(config_path)}
        with DagsterInstance.from_config(str(dagster_home)) as instance:
            (source_key,) = prepare_home(instance, load_config(config_path))
        partition = f"{day}|{load_config(config_path).layout.shard_of(source_key)}"
        done = subprocess.run(
            [str(DAGSTER), "asset", "materialize", "-m", "media_crawler.definitions", "--select", "*",
             "--partition", partition],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            raise AssertionError(f"not a JSON line on stdout: {line[:300]!r}") from None
    assert all(re.match(TS_PATTERN, record["ts"]) for record in records)

    items = [r for r in records if r.get("logger") == "media_crawler.items"]
    assert {r["stage"] for r in items} == {"fetch", "download", "verify", "commit"}
    for record in items:
        assert not ITEM_LINE_KEYS - set(record), (ITEM_LINE_KEYS - set(record), record)
        assert record["partition"] == partition and record["run_id"]
    retries = [r for r in items if r["outcome"] == "retry"]
    assert retries and {r["error_class"] for r in retries} == {"http_5xx"}
    assert sum(1 for r in items if r["stage"] == "commit" and r["outcome"] == "ok") == 9

    framework = [r for r in records if r.get("dagster_event_type")]
    # Dagster's internal names for run start/success are PIPELINE_START/PIPELINE_SUCCESS.
    assert {"PIPELINE_START", "STEP_START", "ASSET_MATERIALIZATION", "PIPELINE_SUCCESS"} <= {
        r["dagster_event_type"] for r in framework}
    assert {r["run_id"] for r in framework} == {items[0]["run_id"]}

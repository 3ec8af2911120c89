"""The demo's closing summary after a real crawl of the simulator: each line true of the place it names
(the ledger, the store, the Dagster home's run history), a failed partition named by its shard."""
import requests
from dagster import DagsterInstance

from media_crawler.commands.crawl import crawl
from media_crawler.commands.demo import store_snapshot, summary_lines
from media_crawler.config import load_config
from media_crawler.dagster_home import ensure_dagster_home
from media_crawler.store.ledger import Ledger
from media_crawler_tests.conftest import write_config


def test_every_summary_line_is_true_of_what_it_names(crawl_home, simulator, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(crawl_home / "dagster_home"))  # restored after the test
    dagster_home = ensure_dagster_home(crawl_home)  # as `demo` makes it
    # A well-behaved URL feed and a Bilibili feed that is not JSON: one partition ok, one failed.
    config_path = write_config(crawl_home, simulator, [{"urls": f"{simulator.base_url}/urls/demo.json"},
                                                      {"bilibili": "user 666"}])
    config = load_config(config_path)
    day = requests.get(f"{simulator.base_url}/_sim/truth", timeout=5).json()["days"][-1]
    before = store_snapshot(config.store_root)
    outcome = crawl(config_path, [day])
    after = store_snapshot(config.store_root)

    lines = summary_lines(crawl_home, dagster_home, config_path, crawl_home / "crawl.log.jsonl", outcome,
                          before, after)
    text = "\n".join(lines)

    assert "ledger and Dagster home" not in text
    tasks = Ledger(config.ledger_url).tasks()
    committed = [task for task in tasks if task.state == "committed"]
    kinds = {task.kind for task in committed}
    urls_line = next(line for line in lines if line.startswith("  urls "))
    assert urls_line.split(None, 1)[1] == ", ".join(
        f"{sum(task.kind == kind for task in committed)} {kind}" for kind in ("image", "video", "audio") if kind in kinds)
    assert f"  store: {len(after)} blobs" in text and str(config.store_root) in text
    assert len(after) == len({task.sha256 for task in committed}) > 0
    assert f"  this run: {len(after)} new blobs" in text
    assert f"  ledger: sqlite:///{crawl_home / 'ledger.db'}" in lines  # the ledger is where it says
    assert (crawl_home / "ledger.db").is_file()
    assert "  partitions: 1 ok, 1 failed" in lines
    [failed] = outcome.failed
    assert any(line.startswith(f"    {day} {failed.shard}: ") for line in lines)
    home_line = next(line for line in lines if line.startswith("  Dagster home (run history): "))
    assert str(dagster_home) in home_line
    with DagsterInstance.from_config(str(dagster_home)) as instance:  # the run history is in that home
        assert {run.run_id for run in instance.get_runs()} == {p.run_id for p in outcome.partitions}
    assert f"media-crawler ui --home {crawl_home}" in text

"""The commit stage's input, set up one way for its tests on every store: the simulator's
URL list discovered, downloaded and verified for its last day (download_partition, which
leaves the items staged, not the Dagster step that commits in place on an object store)."""
from __future__ import annotations

from media_crawler.config import load_config
from media_crawler.models import DayWindow
from media_crawler.pipeline.discover import discover
from media_crawler.pipeline.download import download_partition
from media_crawler.pipeline.runtime import Runtime
from media_crawler.pipeline.verify_commit import verify_partition
from media_crawler_tests.conftest import write_config


def verified_partition(home, simulator, *, store: str | None = None):
    """(runtime, source, window) with the partition's items verified and staged; `store`:
    another store than the home's (an s3:// bucket prefix)."""
    settings = {"store": store} if store else {}
    config = load_config(write_config(home, simulator, [{"urls": f"{simulator.base_url}/urls/demo.json"}],
                                      **settings))
    runtime = Runtime.from_config(config)
    [source] = config.sources
    window = DayWindow.parse(simulator.truth()["days"][-1])
    discover(runtime, source, window)
    download_partition(runtime, source, window)
    verify_partition(runtime, source, window)
    return runtime, source, window

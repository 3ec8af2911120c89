"""The crawl's resources (defs/resources.py): read on first use, shared within an
execution, forgotten after it, and sensors that say why when the file is unreadable."""
from __future__ import annotations

import pytest
import yaml
from dagster import DagsterInstance, SkipReason, asset, build_sensor_context, materialize

from media_crawler import config as config_module
from media_crawler.defs import resources as resources_module
from media_crawler.defs.resources import LedgerResource, PlatformsResource, crawl_resources
from media_crawler_tests.shard_support import automation


def write_sources(home, sources: list[dict]):
    home.mkdir(parents=True, exist_ok=True)
    path = home / "sources.yaml"
    path.write_text(yaml.safe_dump({"store": str(home / "store"), "ledger_url": f"sqlite:///{home / 'ledger.db'}",
                                    "sources": sources}))
    return path


@pytest.fixture
def instance():
    with DagsterInstance.ephemeral() as inst:
        yield inst


@pytest.fixture
def reads(monkeypatch):
    """Paths load_config read, in order."""
    seen = []
    real = config_module.load_config

    def counting(path=None):
        seen.append(str(path))
        return real(path)

    monkeypatch.setattr(resources_module, "load_config", counting)
    return seen


def test_the_sensors_skip_with_the_reason_when_the_sources_file_is_unreadable(crawl_home, instance, reads):
    missing = crawl_home / "nowhere.yaml"
    _schedule, registration, unfinished = automation(write_sources(crawl_home, []))
    with build_sensor_context(instance=instance, resources=crawl_resources(str(missing))) as context:
        assert reads == [], "setting the resources up reads nothing"
        registered = registration(context)
        rerequested = unfinished(context)
    for result, doing in ((registered, "not registering sources"), (rerequested, "not re-requesting partitions")):
        assert isinstance(result, SkipReason)
        assert result.skip_message.startswith(f"{doing}: no sources file at {missing}")


def test_a_tick_reads_the_file_once_and_the_next_tick_reads_it_again(crawl_home, instance, reads):
    path = write_sources(crawl_home, [{"bilibili": "user 1"}])
    _schedule, registration, _unfinished = automation(path)
    with build_sensor_context(instance=instance, resources=crawl_resources(str(path))) as context:
        first = registration(context)
    assert reads == [str(path)], "the sensor, its ledger and the layout check share one read"
    assert len(first) == 3, "the shard of bilibili-1, for the recent days"
    write_sources(crawl_home, [{"bilibili": "user 1"}, {"bilibili": "user 2"}])
    with build_sensor_context(instance=instance, resources=crawl_resources(str(path))) as context:
        second = registration(context)
    assert len(reads) == 2, "nothing is kept from the previous tick"
    assert len(second) == 3 and not {r.run_key for r in second} & {r.run_key for r in first}, "bilibili-2 only"
    with build_sensor_context(instance=instance, resources=crawl_resources(str(path))) as context:
        assert registration(context).skip_message == "no new sources"

def test_a_step_shares_one_configuration_and_ledger_and_closes_its_session(crawl_home, instance, reads, monkeypatch):
    path = write_sources(crawl_home, [])
    sessions = []
    real_session = resources_module.runtime_session

    def recording_session():
        sessions.append(real_session())
        return sessions[-1]

    monkeypatch.setattr(resources_module, "runtime_session", recording_session)
    closed = []
    monkeypatch.setattr("requests.Session.close", lambda self: closed.append(self))
    seen = {}

    @asset
    def probe(ledger: LedgerResource, platforms: PlatformsResource) -> None:
        runtime = platforms.runtime()
        seen.update(same_ledger=runtime.ledger is ledger.get(), same_runtime=runtime is platforms.runtime(),
                    store=runtime.store.root)

    for _ in range(2):
        assert materialize([probe], resources=crawl_resources(str(path)), instance=instance).success
    assert seen == {"same_ledger": True, "same_runtime": True, "store": crawl_home / "store"}
    assert reads == [str(path), str(path)], "one read per step, none kept for the next"
    assert len(sessions) == 2 and closed == sessions, "each step's session is closed at its teardown"

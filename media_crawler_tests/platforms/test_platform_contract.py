"""The platform contract, checked for every registered platform: the built-in four and
the fourth one of media_crawler_tests/fourth_platform (registered here through its
entry point, from a temporary dist-info: nothing outside its package names it).

For each platform: its fixtures normalize, its error fixtures classify to an
ErrorClass, the simulator serves it, it has a rate budget (or says it is unlimited),
and an in-process crawl of its simulated demo sources converges: every file the
simulator's truth lists for it is committed, nothing else."""
from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import requests
from dagster import DagsterInstance

from media_crawler.errors import CrawlError, ErrorClass
from media_crawler.platform_spec import CONSERVATIVE_RATE, PlatformSpec
from media_crawler.platforms import registry
from media_crawler_tests.fourth_platform.support import FIXTURES as EXAMPLE_FIXTURES
from media_crawler_tests.fourth_platform.support import register_example

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FOURTH = "example"
PLATFORMS = tuple(dict.fromkeys((*registry.names(), FOURTH)))
ERROR_CLASSES = {member.value for member in ErrorClass}


@pytest.fixture(params=PLATFORMS)
def spec(request, tmp_path_factory, monkeypatch) -> PlatformSpec:
    """The platform's spec; the fourth platform is registered for the test's duration."""
    with contextlib.ExitStack() as stack:
        if request.param == FOURTH and FOURTH not in registry.names():
            stack.enter_context(register_example(tmp_path_factory.mktemp("site"), monkeypatch))
        assert request.param in registry.names()
        yield registry.spec_for(request.param)


def fixture_files(spec: PlatformSpec) -> list[Path]:
    folder = EXAMPLE_FIXTURES if spec.name == FOURTH else FIXTURES / spec.name
    files = sorted(folder.glob("*.json"))
    assert files, f"no fixtures for {spec.name} in {folder}"
    return files


def test_fixtures_normalize(spec):
    from media_crawler.platforms.normalize_cli import normalize_text

    records = 0
    for path in fixture_files(spec):
        out, err = io.StringIO(), io.StringIO()
        status = normalize_text(spec.name, path.read_bytes(), out, err, where=path.name)
        for line in out.getvalue().splitlines():
            printed = json.loads(line)
            if "error_class" in printed:
                assert printed["error_class"] in ERROR_CLASSES, (path.name, printed)
                assert status == 1
            else:
                assert printed["platform"] == spec.name, (path.name, printed)
                records += 1
        for line in err.getvalue().splitlines():
            json.loads(line)  # notes are JSON objects too
    assert records, f"no fixture of {spec.name} normalizes to a record"


def test_error_bodies_classify_to_an_error_class(spec):
    from media_crawler.platforms.normalize_cli import _responses_in
    from media_crawler.platforms.safe_json import loads

    classify = spec.load("classify")
    assert classify is not None, f"{spec.name} has no error classification"
    errors = [path for path in fixture_files(spec) if path.name.startswith("error")]
    assert errors, f"no error fixtures (error*.json) for {spec.name}"
    for path in errors:
        for body in _responses_in(loads(path.read_bytes())):
            error = classify(body)
            assert isinstance(error, CrawlError), (path.name, body)
            assert isinstance(error.error_class, ErrorClass) and error.error_class.value in ERROR_CLASSES


def test_simulator_serves_it(spec):
    from media_crawler_sim.app import SimulatorApp
    from media_crawler_sim.exchange import Request
    from media_crawler_sim.parts import part_for
    from media_crawler_sim.world import World

    part = part_for(spec.name)
    assert part is not None, f"{spec.name} has no simulator part"
    app = SimulatorApp(World(seed=1))
    mounted = {api.prefix for api in app.apis}
    own = part.apis(app.world, app.cdn)
    assert own and {api.prefix for api in own} <= mounted
    assert part.demo_sources and all(source.platform == spec.name for source in part.demo_sources)
    for source in part.demo_sources:
        spec.parse_source(source.as_entry("http://127.0.0.1:1")[spec.name], dict(source.options))
    truth = json.loads(app.dispatch(Request("GET", "/_sim/truth", (), {}, "http://127.0.0.1:1")).body)
    assert any(entry["platform"] == spec.name for entry in truth["media"])
    assert {source.label for source in part.demo_sources} >= {
        entry["source"].replace("http://127.0.0.1:1", "") for entry in truth["media"] if entry["platform"] == spec.name}


def test_it_has_a_rate_budget(spec):
    from media_crawler.pipeline.runtime import default_rates

    rates = default_rates()
    if spec.unlimited:  # only by its own explicit say-so (plain URL lists)
        assert spec.name not in rates and spec.default_rate() is None
        return
    rate, burst = rates[spec.name]
    assert 0 < rate and 0 < burst
    if spec.rate is None:
        assert (rate, burst) == CONSERVATIVE_RATE


def test_a_crawl_of_its_simulated_sources_converges(spec, crawl_home, request):
    from media_crawler.commands.crawl import crawl
    from media_crawler.config import load_config
    from media_crawler_sim.parts import part_for
    from media_crawler_sim.server import Simulator
    from media_crawler.store.ledger import Ledger
    from media_crawler_tests.recovery.support import assert_converged, write_recovery_config

    if spec.name == FOURTH:  # a simulator of its own: the session's was built without the fourth platform
        sim = Simulator(seed=1, port=0)
        sim.start()
        request.addfinalizer(sim.stop)
    else:
        sim = request.getfixturevalue("simulator")
    part = part_for(spec.name)
    sources = [source.as_entry(sim.base_url) for source in part.demo_sources]
    path = write_recovery_config(crawl_home, sim, sources=sources)
    truth = requests.get(f"{sim.base_url}/_sim/truth", timeout=10).json()
    with DagsterInstance.ephemeral() as instance:
        outcome = crawl(path, truth["days"], instance=instance)
    assert not outcome.failed, [(p.source_key, p.day, p.error) for p in outcome.failed]
    expected = {entry["sha256"] for entry in truth["media"] if entry["platform"] == spec.name}
    assert expected
    config = load_config(path)
    assert_converged(config.store_root, Ledger(config.ledger_url), expected)

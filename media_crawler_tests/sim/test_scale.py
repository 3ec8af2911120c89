"""The generated world of any size (media_crawler_sim/scale/): deterministic, lazy, its truth in
pages and as a stream, and crawlable by the real adapters like the demo world."""
from __future__ import annotations

import hashlib
import io
import json

import pytest
import requests
import yaml
from PIL import Image

from media_crawler_sim import Simulator
from media_crawler_sim.scale import WorldSize
from media_crawler_sim.scale.world import BigWorld
from media_crawler_tests.sim.conftest import top_level_boxes

SMALL = WorldSize.of(accounts=2, posts_per_day=2, media_per_post=2)


def session() -> requests.Session:
    http = requests.Session()
    http.trust_env = False
    return http


def paged_truth(http: requests.Session, base_url: str, limit: int) -> list[dict]:
    entries, cursor = [], None
    while True:
        params = {"limit": limit, **({"cursor": cursor} if cursor else {})}
        page = http.get(f"{base_url}/_sim/truth/media", params=params, timeout=30).json()
        assert len(page["media"]) <= limit
        entries += page["media"]
        cursor = page["next_cursor"]
        if cursor is None:
            return entries


def test_no_scale_option_is_the_demo_world():
    with Simulator(seed=1, port=0) as sim:
        truth = sim.truth()
        assert not sim.world.is_generated
        assert len(truth["media"]) == 81 and truth["days"] == ["2026-11-25", "2026-11-26", "2026-11-27"]
        http = session()
        assert http.get(f"{sim.base_url}/_sim/truth", timeout=10).json() == truth
        # its media, paged and streamed, are the same list
        assert paged_truth(http, sim.base_url, 7) == truth["media"]
        lines = http.get(f"{sim.base_url}/_sim/truth.ndjson", timeout=10).text.splitlines()
        assert [json.loads(line) for line in lines] == truth["media"]
        sources = yaml.safe_load(http.get(f"{sim.base_url}/_sim/sources.yaml", timeout=10).text)
        assert sources["sources"][0] == {"bilibili": "user 12345"}
        assert len(sources["sources"]) == 6


def test_same_seed_same_world_other_seed_other_world():
    def entries(seed: int) -> list[dict]:
        with Simulator(seed=seed, port=0, days=2, size=SMALL) as sim:
            return [{**entry, "source": entry["source"].replace(sim.base_url, "")} for entry in sim.truth_media()]

    first, again, other = entries(1), entries(1), entries(2)
    assert first == again
    assert {entry["sha256"] for entry in first}.isdisjoint(entry["sha256"] for entry in other)
    assert [entry["item"] for entry in first] != [entry["item"] for entry in other]


def test_a_huge_world_is_lazy_and_one_account_day_is_at_hand():
    """Lazy: making the world generates no post, and one account's day generates that day's
    posts only (not the world's 3 million). Its memory is measured in bench/limits.py (sim_world)."""
    world = BigWorld(WorldSize(10_000, 10_000, 10_000, 10_000, posts_per_day=10), seed=7, days=30)
    assert world.generated.cache_info().misses == 0
    day = world.account_day("weibo", 9_876, 29)
    assert world.generated.cache_info().misses == len(day) == 10 and all(post.picks for post in day)
    user = world.weibo_users[str(7_000_000_000 + 9_876)]
    assert len(user.posts) == 300
    newest = user.posts[0]
    assert newest.mid == day[-1].post.mid and newest.created.date() == world.days[-1]
    assert world.weibo_posts[user.api][newest.mid] == newest
    # every file of that day is found again from its path alone
    for post in day:
        for path, file in post.files.items():
            assert world.catalog.lookup(path) == file


def test_paged_truth_covers_every_item_once_and_matches_the_stream():
    with Simulator(seed=3, port=0, days=3, size=WorldSize.of(accounts=3, posts_per_day=3, media_per_post=3)) as sim:
        http = session()
        header = http.get(f"{sim.base_url}/_sim/truth", timeout=10).json()
        assert header["generated"] and "media" not in header and header["posts"] == 4 * 3 * 3 * 3
        expected = [
            pick.path for key in sim.world.post_keys() for pick in sim.world.generated(key).picks
        ]
        paged = paged_truth(http, sim.base_url, 17)
        assert [entry["path"] for entry in paged] == expected
        assert len({entry["path"] for entry in paged}) == len(paged)
        assert len({entry["sha256"] for entry in paged}) == len(paged)
        streamed = [json.loads(line) for line in http.get(f"{sim.base_url}/_sim/truth.ndjson", timeout=30).text.splitlines()]
        assert streamed == paged
        too_big = http.get(f"{sim.base_url}/_sim/truth/media", params={"limit": 10**9}, timeout=30).json()
        assert len(too_big["media"]) == min(len(paged), 5_000)
        assert http.get(f"{sim.base_url}/_sim/truth/media", params={"cursor": "x"}, timeout=10).status_code == 400
        # sources, paged and as one sources.yaml
        listed, cursor = [], None
        while True:
            page = http.get(f"{sim.base_url}/_sim/sources", params={"limit": 5, **({"cursor": cursor} if cursor else {})},
                            timeout=10).json()
            listed += page["sources"]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        config = yaml.safe_load(http.get(f"{sim.base_url}/_sim/sources.yaml", timeout=10).text)
        assert config["sources"] == listed == list(sim.sources())
        assert len(listed) == 12 and {"weibo": "user 7000000001", "api": "ajax"} in listed
        assert config["platforms"]["bilibili"]["api_base"] == f"{sim.base_url}/bilibili"


def test_generated_media_are_small_valid_files_served_with_their_truth():
    with Simulator(seed=5, port=0, days=1, size=WorldSize.of(accounts=1, posts_per_day=8, media_per_post=2)) as sim:
        http = session()
        entries = list(sim.truth_media())
        assert {"image", "video", "audio"} <= {entry["kind"] for entry in entries}
        for entry in entries:
            data = sim.world.catalog.content(sim.world.catalog.lookup(entry["path"]))
            assert hashlib.sha256(data).hexdigest() == entry["sha256"] and len(data) == entry["size"]
            assert 100 <= len(data) <= 8_000, entry
            if entry["mime"] in ("image/jpeg", "image/png"):
                Image.open(io.BytesIO(data)).verify()
            else:
                assert top_level_boxes(data)[0] == b"ftyp"
        open_file = next(entry for entry in entries if entry["platform"] == "urls")
        answer = http.get(sim.base_url + open_file["path"], timeout=10)
        assert answer.status_code == 200 and hashlib.sha256(answer.content).hexdigest() == open_file["sha256"]
        assert http.get(sim.base_url + "/media/urls/list-0/0/99-0.jpg", timeout=10).status_code == 404
        assert http.get(sim.base_url + "/media/weibo/large/ffffffffly1zzzzzzzzzzj2abc.jpg", timeout=10).status_code == 404


def test_scale_options_on_the_command_line(capsys):
    from media_crawler_sim.server import main

    assert main(["--port", "8799", "--bilibili-users", "2", "--weibo-users", "1", "--facebook-pages", "0",
                 "--url-lists", "0", "--days", "2", "--print-sources"]) == 0
    config = yaml.safe_load(capsys.readouterr().out)
    assert config["sources"] == [
        {"bilibili": "user 100000000"}, {"bilibili": "user 100000001"}, {"weibo": "user 7000000000"},
    ]
    assert config["allow_hosts"] == ["http://127.0.0.1:8799"]
    assert main(["--port", "8799", "--posts-per-day", "0", "--print-sources"]) == 2
    with pytest.raises(SystemExit):
        main(["--media-size", "huge"])


def test_a_small_generated_world_crawls_completely(crawl_home, monkeypatch):
    from dagster import DagsterInstance

    from media_crawler.commands.crawl import crawl
    from media_crawler.config import load_config
    from media_crawler.store.ledger import Ledger

    with Simulator(seed=11, port=0, days=2, size=SMALL) as sim, DagsterInstance.ephemeral() as instance:
        crawl_home.mkdir(parents=True, exist_ok=True)
        config_path = sim.write_sources(crawl_home / "sources.yaml")
        truth = sim.truth()
        expected = list(sim.truth_media())
        assert {entry["platform"] for entry in expected} == {"bilibili", "weibo", "facebook", "urls"}
        outcome = crawl(config_path, truth["days"], instance=instance)
        assert not outcome.failed, [(p.source_key, p.day, p.error) for p in outcome.failed]
        config = load_config(config_path)
        stored = {p.name for p in (config.store_root / "sha256").glob("*/*/*") if p.is_file()}
        assert stored == {entry["sha256"] for entry in expected}
        committed = {(t.platform, t.item_id) for t in Ledger(config.ledger_url).tasks() if t.state == "committed"}
        assert {(entry["platform"], entry["item"]) for entry in expected} <= committed

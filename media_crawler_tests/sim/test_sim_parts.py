"""Simulator parts without a server: the WBI test vector, byte-range parsing, MP4 box
layout and DASH SegmentBase ranges, Graph `fields` parsing, Weibo's created_at."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from media_crawler_sim import wbi
from media_crawler_sim.api.facebook import requested_fields
from media_crawler_sim.api.weibo_format import created_at
from media_crawler_sim.media import Recipe, dash_segment_base, render
from media_crawler_sim.ranges import ByteRange, Unsatisfiable, requested_range
from media_crawler_tests.sim.conftest import top_level_boxes


def test_wbi_test_vector_from_platforms_md():
    mixin = wbi.mixin_key("7cd084941338484aae1ad9425b84077c", "4932caff0ff746eab6f01bf08b70ac45")
    assert mixin == "ea1db124af3c7062474693fa704f4ff8"
    params = [("foo", "114"), ("bar", "514"), ("zab", "1919810"), ("wts", "1702204169")]
    assert wbi.w_rid(params, mixin) == "8f6f2b5b3d485fe1886cec6a0be8c5d4"
    keys = ("7cd084941338484aae1ad9425b84077c", "4932caff0ff746eab6f01bf08b70ac45")
    signed = wbi.sign({"foo": "114", "bar": "514", "zab": "1919810"}, *keys, 1702204169)
    assert signed["w_rid"] == "8f6f2b5b3d485fe1886cec6a0be8c5d4"
    assert wbi.verify(list(signed.items()), *keys)


@pytest.mark.parametrize(
    ("header", "if_range", "expected"),
    [
        (None, None, None),
        ("bytes=0-9", None, ByteRange(0, 9)),
        ("bytes=90-", None, ByteRange(90, 99)),
        ("bytes=-5", None, ByteRange(95, 99)),
        ("bytes=50-500", None, ByteRange(50, 99)),
        ("bytes=0-1,5-6", None, None),  # multi-range: whole body
        ("items=0-1", None, None),
        ("bytes=0-9", '"old"', None),  # If-Range mismatch: whole body
        ("bytes=0-9", '"tag"', ByteRange(0, 9)),
    ],
)
def test_requested_range(header, if_range, expected):
    assert requested_range(header, if_range, '"tag"', "date", 100) == expected


def test_range_past_the_end_is_unsatisfiable():
    with pytest.raises(Unsatisfiable):
        requested_range("bytes=100-", None, '"tag"', "date", 100)


@pytest.mark.parametrize("fmt", ["mp4", "mov", "m4s-video", "m4s-audio"])
def test_containers_tile_into_boxes_and_segment_base_points_at_sidx(fmt):
    recipe = Recipe(fmt, "key", 640, 360, 5_000)
    data = render(recipe, seed=1)
    boxes = top_level_boxes(data)
    assert boxes[0] == b"ftyp" and boxes[1] == b"moov" and boxes[-1] == b"mdat"
    assert len(data) == 5_000 and render(recipe, seed=1) == data != render(recipe, seed=2)
    if fmt.startswith("m4s"):
        init, index = dash_segment_base(recipe)
        start, end = (int(n) for n in index.split("-"))
        assert data[start + 4 : start + 8] == b"sidx" and end - start + 1 == 44
        assert int(init.split("-")[1]) == start - 1


def test_graph_fields_top_level_names():
    spec = "id,message,attachments{media_type,media,subattachments{media}},full_picture"
    assert requested_fields(spec, ()) == {"id", "message", "attachments", "full_picture"}
    assert requested_fields(None, ("created_time",)) == {"id", "created_time"}


def test_weibo_created_at_is_china_time_in_the_real_format():
    moment = datetime(2022, 3, 23, 7, 10, 31, tzinfo=timezone.utc)
    assert created_at(moment) == "Wed Mar 23 15:10:31 +0800 2022"
    assert created_at(datetime(2026, 11, 26, 23, 30, tzinfo=timezone.utc)).startswith("Fri Nov 27 07:30:00")


def test_api_latency_delays_platform_answers_only(monkeypatch):
    """--api-latency-ms: feed pages and other platform API answers wait, the control routes do not."""
    from media_crawler_sim import app as sim_app
    from media_crawler_sim.app import Behaviour, SimulatorApp
    from media_crawler_sim.exchange import Request
    from media_crawler_sim.world import World

    slept = []
    monkeypatch.setattr(sim_app.time, "sleep", slept.append)
    simulator = SimulatorApp(World(1), Behaviour(api_latency_ms=50))
    ask = lambda path: simulator.dispatch(Request("GET", path, (), {}, "http://127.0.0.1:1"))  # noqa: E731
    ask("/urls/nothing-here")
    assert slept == [0.05]
    ask("/_sim/stats")
    ask("/")
    assert slept == [0.05], "the simulator's own routes answer at once"
    with pytest.raises(ValueError, match="api-latency-ms"):
        Behaviour(api_latency_ms=-1)


def test_stats_totals_leave_out_the_per_path_part():
    """A poller of a big world asks for the totals only (?per_path=0)."""
    import json

    from media_crawler_sim.app import SimulatorApp
    from media_crawler_sim.exchange import Request
    from media_crawler_sim.world import World

    simulator = SimulatorApp(World(1))
    send = lambda path, pairs=(): simulator.dispatch(Request("GET", path, pairs, {}, "http://127.0.0.1:1"))  # noqa: E731
    ask = lambda path, pairs=(): json.loads(send(path, pairs).body)  # noqa: E731
    send("/urls/nothing-here")
    assert "by_path" in ask("/_sim/stats")
    totals = ask("/_sim/stats", (("per_path", "0"),))
    assert set(totals) == {"requests", "bytes_sent"}

"""Shared helpers for the simulator tests: a running Simulator, fixtures, shape checks."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import requests

from media_crawler_sim import Simulator

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REFERERS = {"bilibili": "https://www.bilibili.com/", "weibo": "https://weibo.com/"}


@pytest.fixture(scope="module")
def sim():
    with Simulator(seed=1, port=0) as running:
        yield running


@pytest.fixture(scope="module")
def http():
    with requests.Session() as session:
        session.trust_env = False  # never route 127.0.0.1 through a proxy from the environment
        yield session


def fixture(name: str):
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def json_kind(value) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


def assert_like(actual: dict, sample: dict, keys: list[str] | None = None, where: str = "") -> None:
    """`actual` has the sample's keys (or the listed ones) with the same JSON types."""
    for key in keys if keys is not None else sample:
        assert key in actual, f"{where}.{key} missing"
        if sample[key] is not None and actual[key] is not None:
            assert json_kind(actual[key]) == json_kind(sample[key]), f"{where}.{key}: {actual[key]!r} vs {sample[key]!r}"


def top_level_boxes(data: bytes) -> list[bytes]:
    """ISO-BMFF box types in order; asserts the sizes tile the file exactly."""
    kinds, offset = [], 0
    while offset < len(data):
        size, kind = struct.unpack(">I4s", data[offset : offset + 8])
        assert size >= 8, f"bad box size at {offset}"
        kinds.append(kind)
        offset += size
    assert offset == len(data), "boxes do not end at the end of the file"
    return kinds

"""A platform's part of the simulator, and where the simulator finds it.

The simulator reaches platforms through an entry-point group of its own, keyed by
platform name (the product's `PlatformSpec` names nothing of the simulator):

    [project.entry-points."media_crawler_sim.platforms"]
    instagram = "mc_instagram.sim:PART"

`simulator_parts()` asks the registry for the platforms, in registry order, and takes
each one's part from that group (the built-in four's also from `BUILTIN` below). For
every part found the simulator:
- `build(world)`: adds the platform's accounts, posts and media files to a demo
  World (files go into `world.catalog`, so `/media/...` serves them and the truth
  lists them; a third-party part keeps its own state in `world.parts[name]`);
- `apis(world, cdn)`: the route handlers (api/: `prefix` + `handle`) it mounts;
- `demo_sources` / `fault_sources`: its sources.yaml lines in the demo world;
- `demo_settings(base_url)`: its `platforms.<name>` block of the demo sources.yaml;
- `demo_environment`: variables the demo sets when unset (a demo token);
- `plan_faults(world, book)`: faults its files play (faults.py);
- `generated`: whether it also serves scale/'s generated worlds.
"""
from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Callable

ENTRY_POINT_GROUP = "media_crawler_sim.platforms"


@dataclass(frozen=True)
class SourceSpec:
    """A line of sources.yaml: `platform: spec` plus options. Specs that are paths on the
    simulator (`/urls/demo.json`) get the base URL prefixed when an answer names them."""

    platform: str
    spec: str
    options: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        return f"{self.platform}: {self.spec}"

    def as_json(self, base_url: str) -> dict:
        spec = base_url + self.spec if self.spec.startswith("/") else self.spec
        return {"platform": self.platform, "spec": spec, "options": dict(self.options)}

    def as_entry(self, base_url: str) -> dict:
        """The sources.yaml entry: `{platform: spec, ...options}`."""
        spec = base_url + self.spec if self.spec.startswith("/") else self.spec
        return {self.platform: spec, **dict(self.options)}


def _no_apis(world: Any, cdn: Any) -> tuple:
    return ()


@dataclass(frozen=True)
class SimulatorPart:
    build: Callable[[Any], None] | None = None
    apis: Callable[[Any, Any], tuple] = _no_apis
    demo_sources: tuple[SourceSpec, ...] = ()
    fault_sources: tuple[SourceSpec, ...] = ()
    demo_settings: Callable[[str], dict] | None = None
    demo_environment: tuple[tuple[str, str], ...] = ()
    plan_faults: Callable[[Any, Any], None] | None = None
    generated: bool = False


# The built-in platforms' parts: the entry points this project declares (pyproject.toml),
# here again because an editable install made before the group existed has none of them
# in its metadata. Strings, imported on first use as entry points are: builtin.py imports
# the platform APIs, which take a World, which asks this module for the parts.
BUILTIN = {name: f"media_crawler_sim.builtin:{name.upper()}" for name in ("bilibili", "weibo", "facebook", "urls")}


class SimulatorPartError(ValueError):
    """A simulator part that cannot be loaded, or two different ones for one platform."""


def simulator_parts() -> dict[str, SimulatorPart]:
    """platform -> its SimulatorPart, for every registered platform that has one (registry order)."""
    from media_crawler.platforms.registry import names

    return dict(_parts_of(names(), tuple(sys.path)))


@functools.lru_cache(maxsize=8)
def _parts_of(platforms: tuple[str, ...], path: tuple[str, ...]) -> tuple[tuple[str, SimulatorPart], ...]:
    # Cached: a World and its app ask on every start, and reading the entry points scans
    # every distribution on sys.path. Keyed by the registered platforms and sys.path, what
    # a test changes when it registers a platform through a dist-info (fourth_platform/).
    points = _entry_points()
    return tuple((name, _load(points[name][0])) for name in platforms if name in points)


def clear_cache() -> None:
    _parts_of.cache_clear()


def _entry_points() -> dict[str, list[EntryPoint]]:
    """platform -> its entry points in the group, the built-in table's included."""
    found: dict[str, list[EntryPoint]] = {}
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: (ep.name, ep.value)):
        found.setdefault(point.name, []).append(point)
    for name, value in BUILTIN.items():  # first, whether the metadata lists it or not
        points = found.setdefault(name, [])
        if value not in {point.value for point in points}:
            points.insert(0, EntryPoint(name, value, ENTRY_POINT_GROUP))
    for name, points in found.items():
        if len({point.value for point in points}) > 1:  # the same distribution found twice is no clash
            raise SimulatorPartError(f"platform {name!r} has two simulator parts: "
                                     f"{', '.join(sorted({point.value for point in points}))}")
    return found


def _load(point: EntryPoint) -> SimulatorPart:
    try:
        part = point.load()
    except Exception as exc:  # a broken plug-in must say which one, in one line
        raise SimulatorPartError(f"simulator entry point {point.name} = {point.value} cannot be loaded: "
                                 f"{type(exc).__name__}: {exc}") from None
    if not isinstance(part, SimulatorPart):
        raise SimulatorPartError(f"simulator entry point {point.name} = {point.value} is not a SimulatorPart")
    return part


def part_for(platform: str) -> SimulatorPart | None:
    """A registered platform's part of the simulator, or None when it has none."""
    return simulator_parts().get(platform)


def demo_sources() -> tuple[SourceSpec, ...]:
    return tuple(source for part in simulator_parts().values() for source in part.demo_sources)


def fault_sources() -> tuple[SourceSpec, ...]:
    return tuple(source for part in simulator_parts().values() for source in part.fault_sources)

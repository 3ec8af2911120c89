"""A platform's part of the simulator: what its spec's `simulator` entry names.

`PlatformSpec.simulator` (platform_spec.py) references a `SimulatorPart`. The
simulator asks the registry for every platform's part, in registry order, and:
- `build(world)`: adds the platform's accounts, posts and media files to a demo
  World (files go into `world.catalog`, so `/media/...` serves them and the truth
  lists them; a third-party part keeps its own state in `world.parts[name]`);
- `apis(world, cdn)`: the route handlers (sim/api: `prefix` + `handle`) it mounts;
- `demo_sources` / `fault_sources`: its sources.yaml lines in the demo world;
- `demo_settings(base_url)`: its `platforms.<name>` block of the demo sources.yaml;
- `demo_environment`: variables the demo sets when unset (a demo token);
- `plan_faults(world, book)`: faults its files play (sim/faults.py);
- `generated`: whether it also serves sim/scale's generated worlds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


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


def simulator_parts() -> dict[str, SimulatorPart]:
    """platform -> its SimulatorPart, for every registered platform that has one (registry order)."""
    from media_crawler.platforms.registry import specs

    parts = {}
    for name, spec in specs().items():
        part = spec.load("simulator")
        if part is not None:
            parts[name] = part
    return parts


def demo_sources() -> tuple[SourceSpec, ...]:
    return tuple(source for part in simulator_parts().values() for source in part.demo_sources)


def fault_sources() -> tuple[SourceSpec, ...]:
    return tuple(source for part in simulator_parts().values() for source in part.fault_sources)

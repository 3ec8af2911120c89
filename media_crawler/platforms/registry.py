"""The platforms this process knows: the built-in specs plus third-party ones.

A platform is a package exporting `SPEC = PlatformSpec(...)` (platform_spec.py). The
built-in four are listed here; any installed distribution adds one through the
entry-point group `media_crawler.platforms`:

    [project.entry-points."media_crawler.platforms"]
    instagram = "mc_instagram:SPEC"

Everything that lists platforms (`names()`, config.py, shards.py, the
rate budget, `normalize`, the demo, the simulator) asks `specs()`. The answer is
cached; `clear_cache()` forgets it (tests that add a distribution to sys.path).
"""
from __future__ import annotations

import functools
import importlib
import os
import re
import sys
from importlib.machinery import PathFinder
from typing import TYPE_CHECKING, Any, Mapping

from media_crawler.models import Source
from media_crawler.platform_spec import PlatformSpec
from media_crawler.scrub import register_signature_params

if TYPE_CHECKING:
    from importlib.metadata import Distribution, EntryPoint

    from media_crawler.platforms.base import ApiTransport, PlatformAdapter
    from media_crawler.platform_spec import PlatformSettings

ENTRY_POINT_GROUP = "media_crawler.platforms"
# Order matters: it is the order of the default shard layout, the demo and the simulator's world.
BUILTIN = (
    "media_crawler.platforms.bilibili",
    "media_crawler.platforms.weibo",
    "media_crawler.platforms.facebook",
    "media_crawler.platforms.urls",
)


class RegistryError(ValueError):
    """A third-party platform that cannot be loaded, or that clashes with another one."""


@functools.lru_cache(maxsize=1)
def specs() -> dict[str, PlatformSpec]:
    """name -> spec: the built-in platforms first, then entry points sorted by name."""
    found: dict[str, PlatformSpec] = {}
    for module in BUILTIN:
        spec = importlib.import_module(module).SPEC
        found[spec.name] = spec
    for point in sorted(plugin_entry_points(), key=lambda ep: (ep.name, ep.value)):
        try:
            spec = point.load()
        except Exception as exc:  # a broken plug-in must say which one, in one line
            raise RegistryError(f"platform entry point {point.name} = {point.value} cannot be loaded: "
                                f"{type(exc).__name__}: {exc}") from None
        if not isinstance(spec, PlatformSpec):
            raise RegistryError(f"platform entry point {point.name} = {point.value} is not a PlatformSpec")
        if spec.name != point.name:
            raise RegistryError(f"platform entry point {point.name} names a spec called {spec.name!r}")
        if spec.name in found:
            if found[spec.name] is spec:
                continue  # the same distribution found twice on sys.path
            raise RegistryError(f"platform {spec.name!r} is registered twice ({point.value})")
        found[spec.name] = spec
    for spec in found.values():
        register_signature_params(spec.signature_params)
    return found


def plugin_entry_points() -> list[EntryPoint]:
    """`entry_points(group=ENTRY_POINT_GROUP)`, without parsing every distribution's entry points.

    The standard library's answer parses the entry_points.txt of every installed
    distribution (Dagster's environment has hundreds of console scripts and plug-ins)
    and sorts them all into groups, to keep one group: ~30 ms of every command's
    start-up (fetch-urls', before its first request: issue 31). Here a distribution's
    file is parsed only when the group's name is in its text: a file without that
    text has no entry of the group. Distributions are taken as the standard library
    takes them: in sys.path order, the first of a name only (a shadowed copy never counts).
    And when no file names the group (no plug-in installed, the usual case), importlib.metadata
    is not even imported (`_group_may_be_named`): its import and its walk over every
    distribution were a fifth of the instructions before fetch-urls' first request.
    """
    if not _group_may_be_named():
        return []
    from importlib.metadata import distributions

    points: list[EntryPoint] = []
    names: set[str] = set()
    for dist in distributions():
        name = _normalized_name(dist)
        if name in names:
            continue
        names.add(name)
        text = dist.read_text("entry_points.txt")
        if text and ENTRY_POINT_GROUP in text:
            points.extend(dist.entry_points.select(group=ENTRY_POINT_GROUP))
    return points


def _group_may_be_named() -> bool:
    """False only when no distribution importlib.metadata could find declares an entry
    point of the group: no `entry_points.txt` naming it in any `*.dist-info` or
    `*.egg-info` folder (or an `.egg`'s EGG-INFO) of a sys.path folder, the places the
    standard library's finder looks. A path entry that is not a folder (a zip) or a
    distribution finder of another kind on sys.meta_path: True, the full look decides."""
    if any(getattr(finder, "find_distributions", None) is not None and finder is not PathFinder
           for finder in sys.meta_path):
        return True
    for entry in sys.path:
        folder = str(entry) or "."
        try:
            children = os.listdir(folder)
        except NotADirectoryError:
            return True  # a zip file (importlib.metadata reads those too)
        except OSError:
            continue  # missing or unreadable: nothing importlib.metadata would find either
        egg = folder.lower().endswith(".egg")
        for child in children:
            low = child.lower()
            if low.endswith((".dist-info", ".egg-info")) or egg and low == "egg-info":
                try:
                    with open(os.path.join(folder, child, "entry_points.txt"), encoding="utf-8") as file:
                        if ENTRY_POINT_GROUP in file.read():
                            return True
                except OSError:  # no entry points (or an egg-info file, not a folder)
                    continue
                except UnicodeDecodeError:
                    return True  # the standard library would fail on it: let it say so
    return False


def _normalized_name(dist: Distribution) -> str:
    """The name entry_points() tells distributions apart by: PathDistribution's, from
    its folder's name without reading its metadata; else the metadata's, normalized."""
    normalized = getattr(dist, "_normalized_name", None)
    if isinstance(normalized, str):
        return normalized
    return re.sub(r"[-_.]+", "-", dist.metadata["Name"] or "").lower().replace("-", "_")


def clear_cache() -> None:
    specs.cache_clear()


def names() -> tuple[str, ...]:
    return tuple(specs())


def spec_for(platform: str) -> PlatformSpec:
    """The spec of a registered platform; ValueError in one line otherwise."""
    try:
        return specs()[platform]
    except KeyError:
        raise ValueError(f"unknown platform {platform!r}; expected one of {', '.join(specs())}") from None


def parse_source(platform: str, text: Any, options: Mapping[str, Any] | None = None) -> Source:
    """`("bilibili", "user 12345")`, `("urls", "http://host/feed.json")`: the platform's
    spec (platform_spec.py) reads the entry; an unknown platform is a one-line ValueError."""
    return spec_for(platform.strip().lower()).parse_source(text, options)


def build_adapter(platform: str, settings: "PlatformSettings", transport: "ApiTransport") -> "PlatformAdapter":
    return spec_for(platform).load("adapter")(settings, transport)



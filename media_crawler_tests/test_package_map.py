"""docs/DESIGN.md's package map is a new reader's map: every module or package it names
exists, and every package of the product (and the simulator beside it) is named in it."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "media_crawler"
DESIGN = REPO / "docs" / "DESIGN.md"
PLATFORM_PLACEHOLDER = "<p>"  # `platforms/<p>/client.py`: each platform's own package


def map_rows() -> list[str]:
    text = DESIGN.read_text(encoding="utf-8")
    section = text.split("## Package map", 1)[1].split("\n## ", 1)[0]
    return [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]


def named_paths() -> list[str]:
    """Each backticked path of the table's first column, with `<p>` as every platform package."""
    platforms = sorted(path.parent.name for path in (PACKAGE / "platforms").glob("*/__init__.py"))
    paths = []
    for cell in map_rows():
        for name in re.findall(r"`([^`]+)`", cell):
            expanded = [name.replace(PLATFORM_PLACEHOLDER, p) for p in platforms] if PLATFORM_PLACEHOLDER in name else [name]
            paths.extend(expanded)
    return paths


def resolve(name: str) -> Path:
    """A map path is the product's (`store/cas.py`) unless it names a top-level folder (`media_crawler_sim/`)."""
    top = name.split("/", 1)[0]
    return REPO / name if (REPO / top).is_dir() and not (PACKAGE / top).exists() else PACKAGE / name


def test_every_path_the_map_names_exists():
    missing = [name for name in named_paths() if not resolve(name).exists()]
    assert named_paths() and missing == [], f"docs/DESIGN.md's package map names what is not there: {missing}"


def test_every_package_is_in_the_map():
    named = set(named_paths())
    packages = [path.relative_to(PACKAGE).as_posix() + "/" for path in sorted(PACKAGE.iterdir())
                if path.is_dir() and path.name != "__pycache__"]
    packages.append("media_crawler_sim/")
    unnamed = [package for package in packages if not any(name.startswith(package) for name in named)]
    assert unnamed == [], f"add these to docs/DESIGN.md's package map: {unnamed}"

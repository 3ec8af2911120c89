"""A/B of what every Dagster run worker pays to load the code location's sources.yaml:
parsing the YAML (no parsed copy yet: it parses and writes one) against reading `.sources.yaml.parsed.json`
(media_crawler/config_cache.py), each in a fresh interpreter as a run worker is.

Workload: a sources.yaml of N sources in the simulator's shape (`- bilibili: user 100000000`,
a quarter per platform, Weibo's every tenth with `api: ajax`), partitions and platform
settings as a scale row writes them. Each load is a new `python` process that times, inside
itself, `load_config` and then `definitions.defs()` (the code location as Dagster loads it,
reusing the parse as a run worker does); interleaved A, B, A, B, ... so both sides see the
same moments of the machine. Prints the medians per side and their ratio.

    .venv/bin/python -m bench ab_config_load [--sources 12800] [--loads 10]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHILD = """
import json, sys, time
t0 = time.perf_counter()
from media_crawler.config import load_config
import media_crawler.definitions as definitions
t1 = time.perf_counter()
load_config(sys.argv[1])
t2 = time.perf_counter()
definitions.defs()
t3 = time.perf_counter()
print(json.dumps({"imports_s": t1 - t0, "load_config_s": t2 - t1, "defs_s": t3 - t2}))
"""


def sources_yaml(count: int) -> str:
    platforms = ("bilibili", "weibo", "facebook", "urls")
    lines = ["partitions:", "  start_day: '2026-11-20'",
             "  shards: {bilibili: 30, weibo: 10, facebook: 10, urls: 10}", "sources:"]
    for index in range(count):
        platform = platforms[index % 4]
        if platform == "urls":
            lines.append(f"- urls: http://127.0.0.1:8787/lists/{index}.json")
        elif platform == "facebook":
            lines.append(f"- facebook: page {100000000 + index}")
        else:
            lines.append(f"- {platform}: user {100000000 + index}")
            if platform == "weibo" and index % 40 == 1:
                lines.append("  api: ajax")
    return "\n".join(lines) + "\n"


def load(path: Path) -> dict:
    env = {**os.environ, "MEDIA_CRAWLER_CONFIG": str(path)}
    out = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True,
                         check=True, env=env, cwd=REPO)
    return json.loads(out.stdout)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=int, default=12800)
    parser.add_argument("--loads", type=int, default=10, help="loads per side")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ab-config-") as workdir:
        path = Path(workdir) / "sources.yaml"
        path.write_text(sources_yaml(args.sources))
        copy = path.with_name(f".{path.name}.parsed.json")
        sides: dict[str, list[dict]] = {"yaml": [], "copy": []}
        load(path)  # writes the copy once
        for _ in range(args.loads):
            copy.unlink()
            sides["yaml"].append(load(path))  # parses the YAML and writes the copy, as a first process does
            sides["copy"].append(load(path))  # reads that copy
        result = {"sources": args.sources, "loads_per_side": args.loads}
        for side, loads in sides.items():
            for key in ("imports_s", "load_config_s", "defs_s"):
                result[f"{side}_{key}_median"] = round(statistics.median(item[key] for item in loads), 4)
        result["load_config_ratio_copy_over_yaml"] = round(
            result["copy_load_config_s_median"] / result["yaml_load_config_s_median"], 3)
        print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

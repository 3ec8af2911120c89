#!/usr/bin/env python3
"""Turn one run of the shared peer benchmark (its *.jsonl, physlimits.json and the
machine.json bench/run.sh writes) into bench/RESULTS.md: the machine, issue 4's
acceptance lines with pass/fail, a short reading, and the full table of medians.

    python -m bench report /tmp/media-bench/results/<timestamp> > bench/RESULTS.md

Medians and the x_curl ratio are computed the way the harness's own `bench.py table`
computes them (x_curl: wall time over curl's in the same repetition, then the median).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

PROJECT = "project"


def load(results: Path) -> list[dict]:
    records = []
    for path in sorted(results.glob("*.jsonl")):
        records += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return records


def groups(records: list[dict]) -> dict[tuple[str, str, str], list[dict]]:
    grouped: dict[tuple[str, str, str], list[dict]] = {}
    for record in records:
        grouped.setdefault((record["tag"], record["set"], record["tool"]), []).append(record)
    return grouped


def median(records: list[dict], key) -> float:
    return statistics.median(key(r) if callable(key) else r[key] for r in records)


def x_curl(grouped, tag: str, set_name: str, records: list[dict]) -> float | None:
    curl = {r["rep"]: r["wall"] for r in grouped.get((tag, set_name, "curl"), []) if r["files"] == records[0]["files"]}
    ratios = [r["wall"] / curl[r["rep"]] for r in records if r["rep"] in curl]
    return statistics.median(ratios) if ratios else None


def sent_ratio(record: dict) -> float:
    return record["server"]["bytes_sent"] / record["bytes"]


def verified(records: list[dict]) -> str:
    worst = min(records, key=lambda r: (r["verify"]["ok"], -r["verify"]["missing"] - r["verify"]["corrupt"]))
    v = worst["verify"]
    return f"{v['ok']}/{v['missing']}/{v['corrupt']}"


def all_ok(records: list[dict]) -> bool:
    return all(r["verify"]["ok"] == r["files"] and not r["verify"]["missing"] and not r["verify"]["corrupt"]
               for r in records)


class Check:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str]] = []
        self.reading: list[str] = []

    def add(self, criterion: str, target: str, measured: str, passed: bool | None) -> None:
        verdict = "n/a" if passed is None else ("**pass**" if passed else "**FAIL**")
        self.rows.append((criterion, target, measured, verdict))


def acceptance(grouped) -> Check:
    check = Check()
    g = lambda tag, set_name, tool: grouped.get((tag, set_name, tool), [])  # noqa: E731

    # 1. Clean main corpus: wall <= req_pool8 and <= 2x curl, every file verified.
    project, pool8, curl = g("clean", "main", PROJECT), g("clean", "main", "req_pool8"), g("clean", "main", "curl")
    if project:
        wall = median(project, "wall")
        ratio = x_curl(grouped, "clean", "main", project)
        if pool8:
            pool_wall = median(pool8, "wall")
            check.add("clean main: wall <= req_pool8", f"<= {pool_wall:.2f} s",
                      f"{wall:.2f} s ({wall / pool_wall:.2f}x req_pool8)", wall <= pool_wall)
        if ratio is not None:
            check.add("clean main: wall <= 2x curl", "x_curl <= 2.00", f"x_curl {ratio:.2f} "
                      f"(curl {median(curl, 'wall'):.2f} s)", ratio <= 2.0)
        check.add("clean main: every file verified", f"{project[0]['files']}/0/0 every rep",
                  f"{verified(project)} (worst rep)", all_ok(project))
        check.reading.append(
            f"Clean main corpus ({project[0]['files']} files, {project[0]['bytes'] / 1e6:.0f} MB): the project takes "
            f"{wall:.2f} s ({project[0]['bytes'] / 1e6 / wall:.0f} MB/s)"
            + (f", {wall / median(pool8, 'wall'):.2f}x the time of requests x8" if pool8 else "")
            + (f" and {ratio:.2f}x curl's" if ratio is not None else "")
            + "; unlike the peers it also fsyncs every file before linking it into the store, checks each "
              "against its announced sha256 and verifies its format.")

    # 2. Small files: files/s >= aria2c's.
    project, aria = g("clean", "small", PROJECT), g("clean", "small", "aria2c")
    if project:
        rate = project[0]["files"] / median(project, "wall")
        if aria:
            aria_rate = aria[0]["files"] / median(aria, "wall")
            check.add("small set: files/s >= aria2c", f">= {aria_rate:.0f} files/s",
                      f"{rate:.0f} files/s ({rate / aria_rate:.2f}x aria2c)", rate >= aria_rate)
        check.add("small set: every file verified", f"{project[0]['files']}/0/0 every rep",
                  f"{verified(project)} (worst rep)", all_ok(project))
        check.reading.append(
            f"Small files ({project[0]['files']} x ~{project[0]['bytes'] / project[0]['files'] / 1e3:.0f} KB): "
            f"{rate:.0f} files/s" + (f" against aria2c's {aria_rate:.0f}" if aria else "")
            + f", with {median(project, 'cpu'):.1f} s of CPU; per item the project writes one ledger row "
              "change (batched, one executemany per 100 items), one JSON log line (every stage's outcome), "
              "an fsynced .part, a full decode of every image and a hard link into the content-addressed store "
              "(the store's folders synced once per ledger batch).")

    # 3. Fault profiles: 408/0/0, no slower than req_pool8_retry_app, server bytes < 1.15x corpus.
    for tag in ("f503", "fmix"):
        project, app = g(tag, "main", PROJECT), g(tag, "main", "req_pool8_retry_app")
        if not project:
            continue
        wall = median(project, "wall")
        check.add(f"{tag}: ok / missing / corrupt", f"{project[0]['files']}/0/0 every rep",
                  f"{verified(project)} (worst rep)", all_ok(project))
        if app:
            app_wall = median(app, "wall")
            check.add(f"{tag}: wall <= req_pool8_retry_app", f"<= {app_wall:.2f} s",
                      f"{wall:.2f} s ({wall / app_wall:.2f}x)", wall <= app_wall)
        sent = max(sent_ratio(r) for r in project)
        check.add(f"{tag}: server bytes sent < 1.15x corpus", "< 1.15x",
                  f"{sent:.3f}x (worst rep)", sent < 1.15)
        peers = sorted(((tool, median(rs, sent_ratio)) for (t, s, tool), rs in grouped.items()
                        if t == tag and s == "main" and tool != PROJECT), key=lambda x: x[1])
        if peers:
            check.reading.append(
                f"{tag}: the project resumes cut bodies with Range/If-Range, so the server sent {sent:.3f}x the "
                f"corpus; the peers: " + ", ".join(f"{tool} {ratio:.2f}x" for tool, ratio in peers) + ".")

    # 4. Big single file: peak RSS < 150 MB with 8 workers.
    project = g("clean", "big", PROJECT)
    if project:
        rss = max(r["rss_mb"] for r in project)
        check.add("big (472 MB file): peak RSS < 150 MB", "< 150 MB", f"{rss:.1f} MB (max of {len(project)} reps)",
                  rss < 150)
        others = ", ".join(f"{tool} {median(rs, 'rss_mb'):.0f} MB" for (t, s, tool), rs in grouped.items()
                           if s == "big" and tool != PROJECT)
        check.reading.append(f"Big file: peak RSS {rss:.0f} MB (bodies stream through one 256 KiB buffer per "
                             f"request){'; peers: ' + others if others else ''}.")
    return check


def table(grouped) -> list[str]:
    lines = ["| phase | set | tool | n | wall s | MB/s | files/s | cpu s | RSS MB | x_curl | sent/corpus "
             "| reqs | ok/miss/corrupt | spread |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (tag, set_name, tool), rs in grouped.items():
        wall = median(rs, "wall")
        ratio = x_curl(grouped, tag, set_name, rs)
        spread = (max(r["wall"] for r in rs) - min(r["wall"] for r in rs)) / wall if len(rs) > 1 else 0
        name = "floor.py" if (tag, tool) == ("floor", PROJECT) else f"**{tool}**" if tool == PROJECT else tool
        lines.append(
            f"| {tag} | {set_name} | {name} | {len(rs)} | {wall:.2f} | {rs[0]['bytes'] / 1e6 / wall:.1f} | "
            f"{rs[0]['files'] / wall:.1f} | {median(rs, 'cpu'):.2f} | {median(rs, 'rss_mb'):.1f} | "
            f"{'-' if ratio is None else f'{ratio:.2f}'} | {median(rs, sent_ratio):.3f} | "
            f"{statistics.median(r['server']['requests'] - 1 for r in rs):.0f} | {verified(rs)} | {100 * spread:.0f}% |")
    return lines


NOTES = """What the project does per file that the peers do not, and what it cost when measured
(2026-11-30, a 2-core AMD EPYC VM, ext4 without a journal; perf, strace, py-spy and interleaved
A/B runs of fetch-urls on the main set; seconds vary by +-10% from minute to minute here):
- durability: every .part is fsynced before it is linked into the store; the links' folders (and
  the parents of folders a link had to make) reach the disk in one syncfs before the ledger batch
  that records them (since issue 31; a folder fsync per file before). The peers leave their bytes in the
  page cache and exit. fetch-urls hands each MiB to the kernel for writing as it arrives and keeps
  at most half the workers on large files while small ones remain, so the disk writes while the
  interpreter works. Skipping every fsync (a measurement, not an option) saved 0.17 s of 1.88 s;
- start-up: the imports (SQLAlchemy 0.21 s, requests 0.10 s), the SQLite ledger and every feed
  item recorded before the first download: the first item is recorded at ~0.4 s (requests x8
  sends its first request at ~0.12 s, curl and aria2c in milliseconds);
- sha256 of every byte while streaming (~0.27 s of CPU for the main set at physlimits' rate);
- the `sha256/aa/bb/` folders (the GUIDE's layout): 1.5 new folders per file on a fresh store. On
  this ext4 with the previous repetition's files just deleted, each new inode is found by scanning
  past the recently deleted ones (`recently_deleted` in the kernel): inode creation was 21% of a
  run's CPU samples, mkdir alone 12%. A one-level layout measured 0.18 s faster (1.93 -> 1.75 s,
  8 interleaved runs each) and was not adopted: the layout is the store's format;
- per item in Python, with the GIL shared by the download threads: the HTTP exchange (urllib3
  and http.client), one JSON log line (four before issue 31: fetch, download, verify, commit),
  ledger rows (batched: one executemany per 100 items), verification (size, announced sha256,
  magic bytes, image header and decompression-bomb guard, full decode of every image, MP4 box walk).
fetch-urls spreads the downloads over one forked process per core (2 here, `--processes`), since
with all of the above in Python one process runs out of CPU before the network does.
The fault profiles are where this pays: every cut body is resumed with Range/If-Range instead of
being fetched again, Retry-After is honoured without holding a worker, and nothing unverified
reaches the store."""


def durability_floor(phys: dict, grouped) -> list[str]:
    """What writing the main set durably costs this machine's disk alone, against req_pool8's whole run."""
    total = phys.get("corpus_main_bytes")
    one_file, per_file = phys.get("disk_write_fsync_1file_MBps"), phys.get("disk_write_fsync_per_file_408files_MBps")
    peer = grouped.get(("clean", "main", "req_pool8"))
    if not (total and one_file and per_file and peer):
        return []
    fastest, per_file_s = total / 1e6 / one_file, total / 1e6 / per_file
    return [f"Durability floor: this disk writes the main set's {total / 1e6:.0f} MB with fsync in "
            f"{fastest:.2f} s as one file and {per_file_s:.2f} s as its 408 files (physlimits.py: {one_file:.0f} and "
            f"{per_file:.0f} MB/s), against {median(peer, 'wall'):.2f} s for req_pool8's whole run, "
            "which never waits for the disk."]


def floor_reading(grouped) -> list[str]:
    """bench/floor.py (the `floor` phase) against req_pool8 in its own phase, and the project against it:
    wall by ratios to req_pool8 of each phase, CPU per file (steadier across phases)."""
    lines = []
    for set_name in ("main", "small"):
        floor, pool8 = grouped.get(("floor", set_name, PROJECT)), grouped.get(("floor", set_name, "req_pool8"))
        if not (floor and pool8):
            continue
        floor_wall, pool_wall = median(floor, "wall"), median(pool8, "wall")
        files = floor[0]["files"]
        floor_cpu = median(floor, "cpu") / files * 1000
        ratio = x_curl(grouped, "floor", set_name, floor)
        line = (f"Floor, {set_name} set: bench/floor.py does per file only what the project's guarantees cost "
                f"(stream to a .part, sha256 while writing, fsync, a full decode of every image, link into "
                f"sha256/ab/cd/, one ledger row per item written 100 at a time after one syncfs; 2 processes) and "
                f"nothing else: no retries, URL policy, logs or SQLAlchemy. In the floor phase it took "
                f"{floor_wall:.2f} s against req_pool8's {pool_wall:.2f} s ({floor_wall / pool_wall:.2f}x)"
                + (f", x_curl {ratio:.2f}" if ratio is not None else "") + f", {floor_cpu:.2f} ms of CPU per file.")
        project, clean_pool8 = grouped.get(("clean", set_name, PROJECT)), grouped.get(("clean", set_name, "req_pool8"))
        if project and clean_pool8:
            # Phases run minutes apart and this machine's speed drifts: compare each
            # against req_pool8 of its own phase, not seconds across phases.
            project_ratio = median(project, "wall") / median(clean_pool8, "wall")
            project_cpu = median(project, "cpu") / project[0]["files"] * 1000
            line += (f" The project took {project_ratio:.2f}x req_pool8 in its phase: "
                     f"{project_ratio / (floor_wall / pool_wall):.2f}x the floor by those ratios, and "
                     f"{project_cpu:.2f} ms of CPU per file, {project_cpu / floor_cpu:.2f}x the floor's.")
        lines.append(line)
    return lines


def before_and_after(grouped, before_rev: str) -> list[str]:
    """The project now against a previous revision (the `before` phase), each by its ratio to
    req_pool8 and its CPU per file in its own phase, so minute-to-minute drift cancels."""
    lines = []
    for set_name, now_tag in (("main", "clean"), ("small", "clean")):
        before, now = grouped.get(("before", set_name, PROJECT)), grouped.get((now_tag, set_name, PROJECT))
        pool_before, pool_now = grouped.get(("before", set_name, "req_pool8")), grouped.get((now_tag, set_name, "req_pool8"))
        if not (before and now and pool_before and pool_now):
            continue
        files = now[0]["files"]
        row = []
        for label, rs, pool in (("before", before, pool_before), ("now", now, pool_now)):
            wall, cpu = median(rs, "wall"), median(rs, "cpu")
            row.append((label, wall, wall / median(pool, "wall"), cpu, cpu / files * 1000, median(pool, "cpu") / files * 1000,
                        verified(rs)))
        lines.append(f"| {set_name} | " + " | ".join(
            f"{wall:.2f} s = {ratio:.2f}x req_pool8; {cpu:.2f} s CPU = {per:.2f} ms/file (req_pool8 {pool_per:.2f}); {ok}"
            for _label, wall, ratio, cpu, per, pool_per, ok in row) + " |")
    if not lines:
        return []
    return ["", f"## This revision against `{before_rev}` (the `before` phase, same run, same peers)", "",
            "| set | before | now |", "|---|---|---|"] + lines


def render(results: Path) -> str:
    records = load(results)
    if not records:
        raise SystemExit(f"no *.jsonl results in {results}")
    grouped = groups(records)
    machine = json.loads((results / "machine.json").read_text()) if (results / "machine.json").exists() else {}
    phys = json.loads((results / "physlimits.json").read_text()) if (results / "physlimits.json").exists() else {}
    check = acceptance(grouped)
    out = ["# Download benchmark: media-crawler against the peers", ""]
    out.append(f"Run {machine.get('date', '?')} with `bench/run.sh` (the shared harness `shared/bench/run_bench.sh`, "
               f"results in `{results}`).")
    if machine:
        out.append("")
        out.append(f"Machine: {machine.get('nproc')} cores ({machine.get('cpu')}), "
                   f"{machine.get('mem_total_kb', 0) / 1024 / 1024:.1f} GiB memory, Linux {machine.get('kernel')}, "
                   f"Python {machine.get('python')}; load average {machine.get('loadavg_before')} before the run, "
                   f"{machine.get('loadavg_after')} after.")
        out.append("")
        out.append(f"Project command: `{machine.get('project_cmd')}`")
    out += ["", "## Acceptance (issue 4; medians of the same run as the peers)", "",
            "| criterion | target | measured | result |", "|---|---|---|---|"]
    out += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in check.rows]
    out += ["", "## Reading", ""] + [f"- {line}" for line in check.reading + durability_floor(phys, grouped) + floor_reading(grouped)]
    out += before_and_after(grouped, machine.get("before_rev") or "before")
    out += ["", NOTES]
    out += ["", "## All results (medians)", "",
            "`sent/corpus`: bytes the server sent over the bytes of the files; `ok/miss/corrupt`: the worst "
            "repetition, as the harness verified it by sha256; `spread`: (max - min) / median wall time.", ""]
    out += table(grouped)
    if phys:
        out += ["", "## Physical limits of the machine (physlimits.py)", "", "```", json.dumps(phys, indent=1), "```"]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="one run's results folder (run_bench.sh names it)")
    sys.stdout.write(render(parser.parse_args(argv).results))
    return 0


if __name__ == "__main__":
    sys.exit(main())

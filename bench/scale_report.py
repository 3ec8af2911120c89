"""Markdown tables for bench/SCALE.md from the rows bench/scale.py left in /tmp/scale-results/*.json.

    .venv/bin/python -m bench scale_report [DIR]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def load(directory: Path) -> dict[str, dict]:
    return {path.stem: json.loads(path.read_text()) for path in sorted(directory.glob("*.json"))}


def big(runs, floor=500):
    return [r for r in runs if r["items"] >= floor and r.get("dagster_share") is not None]


def _launch(row: dict) -> str:
    """How the row launched its runs (rows from before issue 28 say nothing: one run per partition)."""
    if "launch" not in row:
        return ""
    launcher = ", CeleryRunLauncher" if row.get("run_launcher") == "CeleryRunLauncher" else ""
    return f" ({row['partitions']} partitions, {row['launch'].split(' (')[0]}{launcher})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path, nargs="?", default=Path("/tmp/scale-results"))
    rows = load(parser.parse_args(argv).directory)
    print("| row | path | sources | items | workers | wall s | items/s | crawler CPU ms/item | PG backends CPU ms/item "
          "| sim CPU ms/item | busiest ≥1 s window per platform (budget: rate × window + burst, see each row) | runs | items/run (min-max) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        if r["kind"] in ("sensors", "idle"):
            continue
        runs = r["per_run"]
        sources = 4 * r["world"]["accounts"]
        print(f"| {name} | {r['kind']} | {sources} | {r['items']} | {r['workers']} | {r['wall_s']:.0f} | {r['items_per_s']:.1f} "
              f"| {r['crawler_cpu_ms_per_item']:.1f} | {r.get('pg_backend_cpu_ms_per_item', float('nan')):.1f} "
              f"| {r['sim_cpu_ms_per_item']:.1f} | {', '.join(f'{k} {v}' for k, v in sorted(r['rate_peaks'].items()))} "
              f"| {len(runs)} {'/'.join(r['statuses'])}{_launch(r)} | {min(x['items'] for x in runs)}-{max(x['items'] for x in runs)} |")
    print()
    print("| row | run wall s (median) | queue wait s (median) | RUN_STARTING -> first item s (median) | Dagster share, all runs (median / max) "
          "| Dagster share, runs >= 500 items (median / max) | outside-items share >= 500 (max) "
          "| RUN_STARTING -> RUN_START s (median / max) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        if r["kind"] in ("sensors", "idle"):
            continue
        runs = r["per_run"]
        shares = [x["dagster_share"] for x in runs if x.get("dagster_share") is not None]
        b = big(runs)
        bshares = [x["dagster_share"] for x in b]
        outside = [x["outside_items_share"] for x in b if x.get("outside_items_share") is not None]
        launches = [x["outside_steps"]["launch_s"] for x in runs if x.get("outside_steps")]
        med = lambda xs: statistics.median(xs) if xs else float("nan")  # noqa: E731
        print(f"| {name} | {med([x['wall_s'] for x in runs if x['wall_s']]):.1f} | {med([x['queued_s'] for x in runs if x['queued_s'] is not None]):.1f} "
              f"| {med([x['to_first_item_s'] for x in runs if x['to_first_item_s'] is not None]):.2f} "
              f"| {med(shares):.1%} / {max(shares, default=float('nan')):.1%} "
              f"| {med(bshares):.1%} / {max(bshares, default=float('nan')):.1%} ({len(b)} runs) "
              f"| {max(outside, default=float('nan')):.1%} "
              f"| {med(launches):.2f} / {max(launches, default=float('nan')):.2f} |")
    print()
    print("| row | event-log rows per run (distinct) | items per run | event-log rows / 10k items | event bytes / 10k items "
          "| ledger bytes/row (table+indexes) | live tuple bytes | claimed-discovered p50 / p95 s | claim query p50 / p95 ms | unfinished query ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        if r["kind"] in ("sensors", "idle"):
            continue
        runs = r["per_run"]
        per = sorted({x.get("event_log_rows", x["events"]) for x in runs})
        print(f"| {name} | {', '.join(map(str, per))} | {min(x['items'] for x in runs)}-{max(x['items'] for x in runs)} "
              f"| {r['event_log_rows_per_10k_items']:.0f} | {r['event_log_bytes_per_10k_items'] / 1e6:.2f} MB "
              f"| {r['ledger_bytes_per_row']:.0f} | {r.get('ledger_live_tuple_bytes', float('nan')):.0f} "
              f"| {r['claimed_minus_discovered_p50_s']:.2f} / {r['claimed_minus_discovered_p95_s']:.2f} "
              f"| {r['claim_query_p50_ms']:.1f} / {r['claim_query_p95_ms']:.1f} | {r['unfinished_query_ms']:.1f} |")
    if "sensors-10k" in rows:
        s = rows["sensors-10k"]
        print()
        print("| backend | sources | shards | registration, first tick (registers all) | registration, steady | unfinished | unfinished, 2nd |")
        print("|---|---|---|---|---|---|---|")
        for backend in ("postgres", "sqlite"):
            t = s[backend]
            print(f"| {backend} | {t['sources']} | {t['shards']} | {t['registration_first_s']:.2f} s ({t['registration_first_result']}) "
                  f"| {t['registration_steady_s']:.2f} s / {t['registration_steady_2_s']:.2f} s | {t['unfinished_s']:.2f} s | {t['unfinished_2_s']:.2f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

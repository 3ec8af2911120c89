"""`python -m bench NAME [args]`: run one benchmark; with no NAME, list them.

Each benchmark is a module of this package with `main(argv) -> int`; `NAME --help`
says its options. Run from the repository root (the working folder is on sys.path).
"""
from __future__ import annotations

import importlib
import sys

BENCHMARKS = {  # name -> what it measures (each module's docstring says more)
    "peer": "the peer download benchmark against curl, aria2c, requests (make bench; bench/RESULTS.md)",
    "floor": "the least any downloader keeping the project's guarantees does (the peer bench's `floor` phase)",
    "startup": "fetch-urls' time and CPU from exec to its first request (feed) and first media request",
    "profile": "CPU by concern of one fetch-urls run (decode, sha256, file system, HTTP, ledger, logs, ...)",
    "report": "bench/RESULTS.md from one run of the peer download benchmark (make bench)",
    "scale": "issue 16's scale rows: the production path, crawl, Celery, sensors (bench/SCALE.md)",
    "scale_report": "bench/SCALE.md's tables from the rows `scale` left",
    "scale_ledger_scan": "the per-run ledger queries and sensor ticks on a big ledger",
    "scaling": "items/s with 1, 2 and 4 workers against the simulator (bench/SCALING.md)",
    "crawl_workers": "`crawl --workers 4` against `--workers 1` on a generated world (bench/CRAWL_WORKERS.md)",
    "synth_ledger": "fill a ledger with N synthesized rows (bench/LEDGER_1M.md)",
    "ledger_queries": "`failures`, `status` and `metrics --once` on a large ledger",
    "unfinished_query": "the unfinished-partitions query on a churned, un-analyzed PostgreSQL ledger, with its plans",
    "run_worker_start": "what a Dagster run worker pays before its run starts, by part",
    "ab_config_load": "A/B: a run worker loading sources.yaml, parsed against cached",
    "limits": "the resource bounds the tests used to assert: fetch-urls RSS, the lazy world's heap, a shard walk",
    "ab_round_trips": "A/B: two per-call costs, a ledger round trip and requests' environment settings",
    "s3_commit": "the S3 store's commit against boto3's upload_file into SeaweedFS (bench/S3_COMMIT.md)",
    "s3_commit_stage": "the commit stage and its blocking check on an s3:// store, a small simulator crawl",
    "export_wacz": "`export --format wacz` of a synthesized crawl: items/s and peak RSS at 1,000 and 10,000 items",
}


def listing() -> str:
    width = max(map(len, BENCHMARKS))
    lines = ["usage: python -m bench NAME [args]   (NAME --help for its options)", ""]
    return "\n".join([*lines, *(f"  {name:<{width}}  {what}" for name, what in BENCHMARKS.items())])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "list"):
        print(listing())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in BENCHMARKS:
        print(f"bench: no benchmark named {name!r}\n\n{listing()}", file=sys.stderr)
        return 2
    sys.argv[0] = f"python -m bench {name}"  # what each parser prints as its usage
    return importlib.import_module(f"bench.{name}").main(rest) or 0


if __name__ == "__main__":
    sys.exit(main())

"""`media-crawler reconcile [--repair] [--verify-hashes] [--json]`: the store against the ledger.

Without --repair it only reports (exit 1 when something needs repair); with
--repair it brings the two back into agreement without deleting anything
that cannot be obtained again (recovery/reconcile.py lists every check).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from media_crawler.config import CONFIG_ENV, load_config

SHOWN_PER_KIND = 10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=os.environ.get(CONFIG_ENV, "sources.yaml"), help="sources.yaml path")
    parser.add_argument("--repair", action="store_true", help="fix what was found (re-queue, quarantine, remove stale .part)")
    parser.add_argument("--verify-hashes", action="store_true", help="re-hash every blob (reads the whole store)")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--part-grace", type=float, default=300.0,
                        help="leave .part files younger than this many seconds alone (default 300)")


def run(args: argparse.Namespace) -> int:
    from media_crawler.recovery.reconcile import reconcile
    from media_crawler.store.cas import BlobStore
    from media_crawler.store.ledger import Ledger

    config = load_config(args.config)
    report = reconcile(Ledger(config.ledger_url), BlobStore(config.store_root), repair=args.repair,
                       verify_hashes=args.verify_hashes, part_grace_s=args.part_grace)
    if args.json:
        print(json.dumps(report.as_json(), indent=2))
    else:
        print_report(report, sys.stdout)
    return 0 if args.repair or not report.problems else 1


def print_report(report, out) -> None:
    verb = "repaired" if report.repaired else "to repair (run with --repair)"
    print(f"checked {report.rows_checked} rows, {report.blobs_checked} blobs"
          f"{' (re-hashed)' if report.hashes_verified else ''}, {report.parts_checked} .part files", file=out)
    if not report.findings:
        print("store and ledger agree", file=out)
        return
    by_kind: dict[str, list] = {}
    for finding in report.findings:
        by_kind.setdefault(finding.kind, []).append(finding)
    for kind, findings in by_kind.items():
        print(f"{kind}: {len(findings)} ({findings[0].action})", file=out)
        for finding in findings[:SHOWN_PER_KIND]:
            print(f"  {finding.subject}: {finding.detail}", file=out)
        if len(findings) > SHOWN_PER_KIND:
            print(f"  ... {len(findings) - SHOWN_PER_KIND} more (--json lists all)", file=out)
    print(f"{len(report.problems)} problem(s) {verb}", file=out)

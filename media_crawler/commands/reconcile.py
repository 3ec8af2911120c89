"""`media-crawler reconcile [--repair] [--verify-hashes] [--json]`: the store against the ledger.

Which store and ledger: those of a sources file (`--config`, default
$MEDIA_CRAWLER_CONFIG or ./sources.yaml), or of a `fetch-urls` store
(`--store DIR [--ledger URL]`: the ledger fetch-urls uses, DIR/ledger.db unless
--ledger names another), with no sources file at all.

Without --repair it only reports (exit 1 when something needs repair), and
each finding says what a repair would do ("would remove"); with --repair it
brings the two back into agreement without deleting anything that cannot be
obtained again (recovery/reconcile.py lists every check) and says what it did.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from media_crawler.config import ConfigError, config_from_dict, load_config
from media_crawler.environment import CONFIG_ENV, config_path_default
from media_crawler.store.database import normalize_url

SHOWN_PER_KIND = 10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=None,
                        help="sources.yaml path (default $MEDIA_CRAWLER_CONFIG, else sources.yaml)")
    parser.add_argument("--store", default=None,
                        help="a fetch-urls store (a folder or s3://BUCKET/PREFIX) instead of a sources file "
                             "(its ledger: DIR/ledger.db, or a bucket's in $MEDIA_CRAWLER_HOME/s3/BUCKET/PREFIX)")
    parser.add_argument("--ledger", default=None,
                        help="with --store: the ledger URL fetch-urls was given with --ledger")
    parser.add_argument("--repair", action="store_true", help="fix what was found (re-queue, quarantine, remove stale .part)")
    parser.add_argument("--verify-hashes", action="store_true", help="re-hash every blob (reads the whole store)")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--part-grace", type=float, default=300.0,
                        help="leave .part files younger than this many seconds alone (default 300)")


def store_and_ledger(args: argparse.Namespace) -> tuple[str | Path, Path, str]:
    """(store location, its local folder, ledger URL) the arguments name; ConfigError when
    they name none or both."""
    if args.store is None:
        if args.ledger:
            raise ConfigError("--ledger goes with --store DIR (a fetch-urls store); a sources file names its own")
        path = Path(args.config or config_path_default())
        if not path.is_file():
            raise ConfigError(f"no sources file at {path} (pass --config FILE, set {CONFIG_ENV}, "
                              "or --store DIR for a fetch-urls store)")
        config = load_config(path)
        return config.store_location, config.store_root, config.ledger_url
    if args.config:
        raise ConfigError("give --config (a sources file) or --store (a fetch-urls store), not both")
    from media_crawler.commands.fetch_urls import store_places

    location, store = store_places(args.store)
    if not store.is_dir():
        raise ConfigError(f"no store folder at {store}")
    # Built as fetch-urls builds it (commands/fetch_urls.py), so this is the ledger that
    # fetch-urls writes: --ledger, else DIR/ledger.db (MEDIA_CRAWLER_LEDGER_URL wins for both).
    config = config_from_dict({"store": location, "ledger_url": args.ledger or f"sqlite:///{store / 'ledger.db'}"})
    ledger_url = normalize_url(config.ledger_url)
    sqlite_file = _sqlite_file(ledger_url)
    if sqlite_file is not None and not sqlite_file.is_file():
        # Opening it would create an empty ledger, and every blob would look like an orphan.
        raise ConfigError(f"no ledger at {sqlite_file}: is {store} a fetch-urls store? (else pass --ledger URL)")
    return location, store, ledger_url


def _sqlite_file(url: str) -> Path | None:
    from media_crawler.store.urls import sqlite_file

    path = sqlite_file(url)
    return None if path is None or str(path) == ":memory:" else path


def run(args: argparse.Namespace) -> int:
    from media_crawler.recovery.reconcile import reconcile
    from media_crawler.store.open_store import open_answer_store, open_blob_store
    from media_crawler.store.ledger import Ledger

    location, local_root, ledger_url = store_and_ledger(args)
    report = reconcile(Ledger(ledger_url), open_blob_store(location, local_root=local_root), repair=args.repair,
                       verify_hashes=args.verify_hashes, part_grace_s=args.part_grace,
                       answers=open_answer_store(location, local_root=local_root))
    if args.json:
        print(json.dumps(report.as_json(), indent=2))
    else:
        print_report(report, sys.stdout)
    return 0 if args.repair or not report.problems else 1


def print_report(report, out) -> None:
    print(f"checked {report.rows_checked} rows, {report.blobs_checked} blobs"
          f"{' (re-hashed)' if report.hashes_verified else ''}, {report.parts_checked} .part files", file=out)
    if not report.findings:
        print("store and ledger agree", file=out)
        return
    by_kind: dict[str, list] = {}
    for finding in report.findings:
        by_kind.setdefault(finding.kind, []).append(finding)
    for kind, findings in by_kind.items():
        actions = Counter(finding.action for finding in findings)
        said = (next(iter(actions)) if len(actions) == 1
                else ", ".join(f"{count} {action}" for action, count in actions.items()))
        print(f"{kind}: {len(findings)} ({said})", file=out)
        for finding in findings[:SHOWN_PER_KIND]:
            print(f"  {finding.subject}: {finding.detail}", file=out)
        if len(findings) > SHOWN_PER_KIND:
            print(f"  ... {len(findings) - SHOWN_PER_KIND} more (--json lists all)", file=out)
    if report.repaired:
        print(f"{len(report.problems)} problem(s) repaired", file=out)
    else:
        print(f"{len(report.problems)} problem(s) to repair: nothing was changed (run with --repair)", file=out)

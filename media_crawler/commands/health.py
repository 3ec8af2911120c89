"""`media-crawler health --live | --ready [--config sources.yaml]`: exit 0 healthy, 1 not.

Prints one JSON line saying why (`{"probe":"ready","ok":false,"reason":"platform
in auth failure: facebook (since 2026-11-27T10:00:00.000Z, 2 failure(s), no success
since)",...}`), for orchestrators' probes and for the person reading their events.
A success of the platform after its auth failures ends the failure (state, not a window). `--ready` also names the
platforms whose requests mostly fail server-side (`checks.platform_outage`:
down or degraded, since when), without failing on them.
"""
from __future__ import annotations

import argparse
import json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from media_crawler.observe.target import add_config_argument

    add_config_argument(parser)
    probe = parser.add_mutually_exclusive_group(required=True)
    probe.add_argument("--live", action="store_true", help="the process and the database answer")
    probe.add_argument("--ready", action="store_true",
                       help="database and store writable, disk above min_free_bytes, no platform in auth failure "
                            "(platforms down or degraded are reported, not gating)")


def run(args: argparse.Namespace) -> int:
    from media_crawler.observe.health import ProbeResult, live, ready
    from media_crawler.scrub import excerpt
    from media_crawler.observe.target import observed_config
    from media_crawler.store.database import get_engine
    from media_crawler.store.ledger import Ledger

    probe = "live" if args.live else "ready"
    config = None
    try:
        config = observed_config(args.config)
        if args.live:
            # get_engine, not Ledger: liveness must not create or migrate the schema as a side effect.
            result = live(get_engine(config.ledger_url))
        else:
            # Ledger migrates, as any worker does when it starts: ready means a worker could start now.
            result = ready(Ledger(config.ledger_url).engine, config)
    except Exception as exc:  # an unreadable config or an unknown driver is an answer too
        result = ProbeResult(probe, False, excerpt(f"{type(exc).__name__}: {exc}", 300))
    line = result.as_json()
    if config is not None:  # which ledger and Dagster home the probe read (observe/read_from.py)
        from media_crawler.observe.read_from import read_from

        line["read_from"] = {key: value for key, value in read_from(config, dagster_read=False).items()
                             if key != "dagster_storage"}
    print(json.dumps(line, ensure_ascii=False, separators=(",", ":")))
    return 0 if result.ok else 1

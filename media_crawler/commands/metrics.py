"""`media-crawler metrics --port P [--host H] [--once] [--config sources.yaml]`.

Serves Prometheus text at http://H:P/metrics, computed from the ledger on each
scrape (observe/metrics.py), until SIGINT/SIGTERM. `--once` prints one scrape
to stdout and exits (for a node_exporter textfile collector, or a quick look).
With DAGSTER_HOME naming an instance, queued runs and the run queue and step
start delay histograms come from its run storage too (`--no-dagster`: not).
Alerting rules over these metrics: deploy/alerts.yaml.
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading


# The console script ends the process after the report without the interpreter's
# teardown (cli.end_without_teardown: the ledger's connections are closed first):
# freeing every object the imports and the report left takes time and writes nothing.
EXIT_WITHOUT_TEARDOWN = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from media_crawler.observe.target import add_config_argument

    add_config_argument(parser)
    parser.add_argument("--port", type=int, default=9464, help="port to serve /metrics on (default 9464)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1; 0.0.0.0 for a scraper on another host)")
    parser.add_argument("--once", action="store_true", help="print one scrape to stdout and exit")
    parser.add_argument("--no-dagster", action="store_true",
                        help="leave out Dagster's queued runs and delays (no run storage read)")


def run(args: argparse.Namespace) -> int:
    from prometheus_client import generate_latest, start_http_server

    from media_crawler.observe.metrics import ledger_registry
    from media_crawler.observe.target import observed_config
    from media_crawler.store.ledger import Ledger

    config = observed_config(args.config)
    instance = None
    if not args.no_dagster:
        from media_crawler.observe.dagster_runs import instance_from_environment

        try:
            instance, why_not = instance_from_environment()
        except Exception as exc:  # the ledger's metrics still answer; the instance's absence is said once
            instance, why_not = None, f"{type(exc).__name__}: {exc}"
        if instance is None:
            from media_crawler.scrub import excerpt

            print(f"Dagster run storage not read: {excerpt(why_not, 300)}", file=sys.stderr, flush=True)
    from media_crawler.observe.read_from import read_from, read_from_line

    print(read_from_line(read_from(config, dagster_read=not args.no_dagster)), file=sys.stderr, flush=True)
    registry = ledger_registry(Ledger(config.ledger_url).engine, config, instance=instance)
    if args.once:
        sys.stdout.write(generate_latest(registry).decode())
        return 0
    server, thread = start_http_server(args.port, addr=args.host, registry=registry)
    host, port = server.server_address[:2]
    # One line on stderr so a wrapper (or a test using --port 0) learns the address.
    print(f"serving Prometheus metrics on http://{host}:{port}/metrics", file=sys.stderr, flush=True)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    stop.wait()
    server.shutdown()
    thread.join(timeout=5)
    return 0

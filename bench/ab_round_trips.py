"""A/B of two per-call costs the scale rows cannot separate from the machine's noise
(a 2-vCPU VM whose speed moved 2x within an hour), measured interleaved in one process:

- a ledger call on PostgreSQL with `pool_pre_ping` (a round trip on every checkout) against
  the ledger's engine, which pings only a connection idle for IDLE_PING_S;
- an API GET through RequestsTransport reading requests' environment settings on every
  call, twice (the old `_send` and the pinning check's proxy look-up), against once per origin.

Workload: PostgreSQL on 127.0.0.1, one SELECT by primary key per call, single thread; the
API GETs go to a local server answering `{}`, with 60 variables in the environment (a
container's usual count). Prints per-call wall and CPU for each side, and their ratio.

    .venv/bin/python -m bench ab_round_trips [--calls 2000]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import uuid

from sqlalchemy import create_engine, text

from bench.instruments import json_server
from media_crawler.net.policy import UrlPolicy
from media_crawler.platforms.transport import RequestsTransport
from media_crawler.store.database import get_engine

ADMIN = "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres"
BLOCK = 100  # calls per side before switching: both sides see the same moments of the machine


def per_call(side_a, side_b, calls: int) -> dict:
    totals = {"a": [0.0, 0.0], "b": [0.0, 0.0]}
    for _block in range(calls // BLOCK):
        for name, call in (("a", side_a), ("b", side_b)):
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(BLOCK):
                call()
            totals[name][0] += time.perf_counter() - wall
            totals[name][1] += time.process_time() - cpu
    n = (calls // BLOCK) * BLOCK
    out = {f"{name}_{kind}_us": round(values[i] / n * 1e6, 1)
           for name, values in totals.items() for i, kind in enumerate(("wall", "cpu"))}
    out["wall_ratio_b_over_a"] = round(totals["b"][0] / totals["a"][0], 3)
    out["cpu_ratio_b_over_a"] = round(totals["b"][1] / totals["a"][1], 3)
    return out


def ledger_calls(calls: int) -> dict:
    name = f"mc_ab_{uuid.uuid4().hex[:8]}"
    admin = create_engine(ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}"
    pre_ping = create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=10)
    idle_ping = get_engine(url)
    try:
        with pre_ping.begin() as conn:
            conn.execute(text("create table t (id int primary key, v text)"))
            conn.execute(text("insert into t values (1, 'x')"))

        def select_with(engine):
            def call():
                with engine.connect() as conn:
                    conn.execute(text("select v from t where id = 1")).scalar_one()
            return call

        return dict(a="pool_pre_ping", b="ping when idle", **per_call(select_with(pre_ping), select_with(idle_ping), calls))
    finally:
        pre_ping.dispose()
        idle_ping.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()


class EveryCallTransport(RequestsTransport):
    """The transport as it was: requests' environment settings read on every call, twice."""

    def _send(self, target, headers):
        self.session.merge_environment_settings(target.url, {}, True, None, None)
        return super()._send(target, headers)

    def _proxy_for(self, target_url):
        self.session.merge_environment_settings(target_url, {}, True, None, None)
        return super()._proxy_for(target_url)


def api_calls(calls: int) -> dict:
    for n in range(60 - len(os.environ)):
        os.environ[f"AB_FILLER_{n}"] = "x" * 40
    local = UrlPolicy.from_entries(["127.0.0.1:*"])
    with json_server({}) as origin:
        new = RequestsTransport(policy_for=lambda _p: local)
        old = EveryCallTransport(policy_for=lambda _p: local)
        url = origin + "/api"
        return dict(a="read every call (old)", b="once per origin", environment_variables=len(os.environ),
                    **per_call(lambda: old.get("urls", url), lambda: new.get("urls", url), calls))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args(argv)
    print({"ledger_call": ledger_calls(args.calls)})
    print({"api_get": api_calls(args.calls)})
    return 0


if __name__ == "__main__":
    sys.exit(main())

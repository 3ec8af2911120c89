"""What the per-run ledger queries cost on a big ledger: the lease scans, the claim, the
unfinished-partitions query, and one tick of each sensor (issue 16, bench/SCALE.md "Found").

    .venv/bin/python -m bench synth_ledger postgresql://postgres@127.0.0.1:5432/mc_scale_1m --create-db \\
        --sources-yaml /tmp/scale-1m/sources.yaml --store /tmp/scale-1m/store
    .venv/bin/python -m bench scale_ledger_scan postgresql+psycopg2://postgres@127.0.0.1:5432/mc_scale_1m \\
        /tmp/scale-1m/sources.yaml

Read-only except `claim` (leases one shard-day's claimable rows, as a download step does)
and the sensors' registration of the 10,000 sources. Prints JSON.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from bench.instruments import timed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the ledger's database URL (a ledger synth_ledger filled)")
    parser.add_argument("sources_yaml", help="the sources.yaml synth_ledger wrote beside it")
    args = parser.parse_args(argv)
    url, sources_yaml = args.url, args.sources_yaml
    import yaml
    from sqlalchemy import func, select, text

    from media_crawler.store.reports.reads import unfinished_partition_counts as unfinished_partitions
    from media_crawler.models import Lease
    from media_crawler.pipeline.leases import dead_owners
    from media_crawler.shards import PartitionLayout
    from media_crawler.store.ledger import Ledger
    from media_crawler.store.leases import claim_downloads, renew_leases
    from media_crawler.store.schema import tasks as T

    ledger = Ledger(url)
    out = {}
    with ledger.engine.connect() as conn:
        out["rows"] = conn.execute(select(func.count()).select_from(T)).scalar()
        out["leased_rows"] = conn.execute(select(func.count()).select_from(T).where(T.c.lease_owner.is_not(None))).scalar()
    out["dead_owners"], _ = timed(lambda: dead_owners(ledger))
    out["heartbeat_owner_holding_nothing"], _ = timed(lambda: renew_leases(ledger, "bench-nobody/1/1", 120.0))
    out["unfinished_partitions"], rows = timed(lambda: unfinished_partitions(ledger))
    out["unfinished_partitions"]["groups"] = len(rows)
    # A claim as download_partition makes it: one shard (16 per platform) of 10,000 sources, one day.
    raw = yaml.safe_load(Path(sources_yaml).read_text())
    from media_crawler.config import config_from_dict

    keys = [source.key for source in config_from_dict({"sources": raw["sources"]}).sources]
    groups = PartitionLayout().group(keys)
    shard, members = max(groups.items(), key=lambda item: len(item[1]))
    with ledger.engine.connect() as conn:
        day = conn.execute(select(T.c.day).where(T.c.state == "discovered").order_by(T.c.day.desc()).limit(1)).scalar()
    out["claim_one_shard_day"], claimed = timed(lambda: claim_downloads(ledger, source_key=members, day=day,
                                                                     lease=Lease("bench-scale/1/1", 1.0)), repeat=3)
    out["claim_one_shard_day"].update(shard=shard, sources=len(members), day=day, first_claimed=len(claimed))
    if ledger.engine.dialect.name == "postgresql":
        with ledger.engine.connect() as conn:
            for name, sql in (("dead_owners", "select lease_owner, lease_expires_at from mc_tasks where lease_owner is not null"),
                              ("heartbeat", "update mc_tasks set lease_expires_at = 0 where lease_owner = 'x'"),
                              ("unfinished", "select source_key, day, count(*) from mc_tasks where state not in "
                                             "('committed','gone') group by source_key, day")):
                plan = [row[0] for row in conn.execute(text(f"explain {sql}"))]
                out[f"plan_{name}"] = plan[:4]
    from bench.scale_sensors import time_sensors

    with tempfile.TemporaryDirectory(prefix="scale-1m-sensors-", dir="/tmp") as scratch:
        backend = "postgres" if url.startswith("postgresql") else "sqlite"
        out["sensors"] = time_sensors(Path(sources_yaml), Path(scratch), url, backend)
    print(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

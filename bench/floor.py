"""The least a downloader can do and still meet issue 4's durability rules: a floor.

Per file, only what the issue and ../shared/GUIDE.md require of every blob:
stream the body to a `.part` in a staging folder, sha256 while writing, fsync,
link it into `sha256/ab/cd/<sha256>` (making the folders), fsync the folder,
drop the `.part`. Nothing else: no ledger rows, no retries, no verification,
no logs, no safety checks. It imports SQLAlchemy and does nothing with it,
because the ledger the GUIDE prescribes is built on it and a real run pays for
the import before its first request.

Run through the peer harness as the "project" tool, the same corpus in the same
run as the peers (bench/run_floor.sh). If this is slower than a peer that never
fsyncs, no implementation with these rules on this machine can be faster.

    floor.py --feed URL --store DIR [--workers 8] [--processes 2]
"""
import argparse
import hashlib
import json
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import requests
import sqlalchemy  # noqa: F401  (the ledger's import cost; see the docstring)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--feed", required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args(argv)
    items = requests.get(args.feed, timeout=30).json()["items"]
    staging = os.path.join(args.store, "staging")
    blobs = os.path.join(args.store, "sha256")
    os.makedirs(staging, exist_ok=True)
    os.makedirs(blobs, exist_ok=True)
    children = []
    for shard in range(1, args.processes):  # shard i: items i, i+P, ... (fetch-urls shards by ledger id)
        pid = os.fork()
        if pid == 0:
            os._exit(_download_all(items[shard::args.processes], staging, blobs, args.workers // args.processes))
        children.append(pid)
    failed = _download_all(items[0::args.processes], staging, blobs, max(1, args.workers // args.processes))
    for pid in children:
        failed += os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    print(json.dumps({"files": len(items), "failed_shards": failed}))
    return 1 if failed else 0


def _download_all(items, staging, blobs, threads) -> int:
    local = threading.local()

    def fetch(index_item):
        index, item = index_item
        session = getattr(local, "session", None) or requests.Session()
        local.session = session
        part = os.path.join(staging, f"{os.getpid()}-{index}.part")
        digest = hashlib.sha256()
        with session.get(item["url"], stream=True, timeout=30) as response:
            response.raise_for_status()
            with open(part, "wb", buffering=0) as handle:
                for chunk in response.iter_content(1 << 20):
                    digest.update(chunk)
                    handle.write(chunk)
                os.fsync(handle.fileno())
        name = digest.hexdigest()
        folder = os.path.join(blobs, name[:2], name[2:4])
        os.makedirs(folder, exist_ok=True)
        try:
            os.link(part, os.path.join(folder, name))
        except FileExistsError:
            pass
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(fd)
        os.close(fd)
        os.unlink(part)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(fetch, enumerate(items)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

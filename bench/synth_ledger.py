"""Fill a ledger with N synthesized rows (default 1,000,000) for the observability benchmark (issue 16).

    python -m bench synth_ledger sqlite:////tmp/mc_bench/ledger.db [--rows 1000000]
    python -m bench synth_ledger postgresql://postgres@127.0.0.1:5432/mc_bench_1m --create-db
    python -m bench synth_ledger URL --sources-yaml /tmp/mc_bench/sources.yaml --store /tmp/mc_bench/store

The schema is the project's own: `Ledger(url)` creates and migrates it, and the rows
go into `mc_tasks`, `mc_feed_errors` and `mc_rate_budget` as the stages would leave
them. The workload (seeded, so both backends hold the same rows):

- 10,000 sources over the 4 platforms (bilibili 4,000, weibo 3,000, facebook 2,000,
  urls 1,000), keys built as `Source.key` builds them (`bilibili-<uid>`, `urls-<sha10>`);
- 100 publication days up to yesterday, rows discovered over those days (a bit more
  recently: the crawl keeps up with new days), so the last hour and the last day hold
  the share of commits and failures that a steady crawl leaves there;
- states: committed 93.9 %, discovered 2 % (some halted: platform_halted, disk_guard),
  downloading 0.5 % (a third with expired leases), downloaded / verified 0.1 % each,
  retry_wait 1.4 % (backoff ahead or due), failed 1 %, gone 1 %;
- error classes by state (transient ones in retry_wait, alerting / exhausted ones in
  failed, not_found in gone), wait reasons as the stages write them (store/waits.py),
  canonical and signed media URLs, sha256 and sizes, run ids per partition run;
- some hundreds of feed-page errors (mostly resolved) and a rate budget per platform.

Loaded through the store (media_crawler/store/bulk_load.py): COPY on PostgreSQL (then
ANALYZE, as autovacuum would after such a load) and executemany in batches on SQLite.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from datetime import date, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from media_crawler.store import bulk_load
from media_crawler.store.database import normalize_url
from media_crawler.store.ledger import Ledger

SOURCES_PER_PLATFORM = {"bilibili": 4000, "weibo": 3000, "facebook": 2000, "urls": 1000}
DAYS = 100
HOUR = 3600.0
DAY_S = 86400.0
STATE_MIX = (  # (state, share)
    ("committed", 0.939), ("discovered", 0.02), ("downloading", 0.005), ("downloaded", 0.001),
    ("verified", 0.001), ("retry_wait", 0.014), ("failed", 0.01), ("gone", 0.01),
)
RETRY_CLASSES = (("network_timeout", 30), ("http_5xx", 25), ("rate_limited", 20), ("connection_reset", 10),
                 ("truncated_body", 6), ("hash_mismatch", 4), ("url_expired", 5))
FAILED_CLASSES = (("http_5xx", 20), ("network_timeout", 15), ("auth", 10), ("parse_error", 8), ("bad_signature", 12),
                  ("corrupt_media", 10), ("too_large", 5), ("disallowed_url", 5), ("unsupported_media", 10),
                  ("storage_error", 5))
GONE_CLASSES = (("not_found", 95), ("url_expired", 5))
MESSAGES = {
    "network_timeout": "read timed out after 30.0 s",
    "http_5xx": "HTTP 503 Service Unavailable",
    "rate_limited": "HTTP 429 Too Many Requests (Retry-After: 120)",
    "connection_reset": "connection reset by peer",
    "truncated_body": "body ended at 1048576 of 5242880 bytes",
    "hash_mismatch": "sha256 differs from the announced one",
    "url_expired": "HTTP 403: signed URL expired",
    "auth": "HTTP 401: login required",
    "parse_error": "feed page did not match the expected schema",
    "bad_signature": "HTML served instead of image/jpeg",
    "corrupt_media": "image does not decode: truncated JPEG",
    "too_large": "Content-Length 4294967296 above max_bytes",
    "disallowed_url": "host not in the platform's allow list",
    "unsupported_media": "video without a moov box",
    "storage_error": "rename into the store failed: EIO",
    "not_found": "HTTP 404 Not Found",
}


def source_keys(rng: random.Random) -> list[tuple[str, str, str]]:
    """(platform, source_key, ident) like models.Source.key builds them."""
    out = []
    for platform, count in SOURCES_PER_PLATFORM.items():
        for n in range(count):
            if platform == "urls":
                ident = f"https://feeds{n % 37}.example.org/media/{n}.json"
                out.append((platform, "urls-" + hashlib.sha256(ident.encode()).hexdigest()[:10], ident))
            else:
                ident = str(rng.randrange(10_000, 4_000_000_000))
                out.append((platform, f"{platform}-{ident}", ident))
    # ids drawn at random may repeat: keep the first of each key
    seen, unique = set(), []
    for entry in out:
        if entry[1] not in seen:
            seen.add(entry[1])
            unique.append(entry)
    return unique


def weighted(rng: random.Random, choices) -> str:
    return rng.choices([c for c, _ in choices], weights=[w for _, w in choices])[0]


def rows(n: int, now: float, seed: int = 16):
    rng = random.Random(seed)
    sources = source_keys(rng)
    today = date.fromtimestamp(now)
    days = [(today - timedelta(days=d)).isoformat() for d in range(1, DAYS + 1)]
    states, weights = [s for s, _ in STATE_MIX], [w for _, w in STATE_MIX]
    for i in range(n):
        platform, source_key, _ident = sources[rng.randrange(len(sources))]
        # Ages skew recent: the crawl discovered most rows over the 100 days, a steady share each hour.
        age_s = rng.random() * DAYS * DAY_S
        day = days[min(int(age_s // DAY_S), DAYS - 1)]
        state = rng.choices(states, weights)[0]
        discovered = now - age_s
        queued = discovered + rng.uniform(0.01, 2.0)
        run_id = hashlib.md5(f"{source_key}|{day}|{int(discovered // 600)}".encode()).hexdigest()
        kind = "video" if platform == "bilibili" or (platform in ("weibo", "facebook") and rng.random() < 0.2) else "image"
        variant = {"video": "1080p", "image": "orig"}[kind] if rng.random() < 0.8 else f"part-{rng.randrange(9)}"
        item = f"{i:09d}"
        if platform == "bilibili":
            canonical = f"https://www.bilibili.com/video/BV1{item}x"
            media = f"https://upos-sz-mirror.bilivideo.com/ugc/{item}-1-30080.m4s?deadline={int(now) + 7200}&upsig=" \
                    f"{rng.getrandbits(64):016x}"
        elif platform == "weibo":
            canonical = f"https://weibo.com/{source_key[6:]}/{item}"
            media = f"https://wx{rng.randrange(1, 5)}.sinaimg.cn/large/{item}.jpg?Expires={int(now) + 7200}&ssig=" \
                    f"{rng.getrandbits(48):012x}"
        elif platform == "facebook":
            canonical = f"https://www.facebook.com/{source_key[9:]}/posts/{item}"
            media = f"https://scontent.xx.fbcdn.net/v/t39/{item}_n.jpg?oh={rng.getrandbits(64):016x}&oe=66AB12CD"
        else:
            canonical = f"https://media.example.org/{source_key}/{item}.jpg"
            media = canonical
        size = int(rng.lognormvariate(13.5 if kind == "image" else 17.0, 1.0))
        sha = hashlib.sha256(item.encode()).hexdigest()
        row = dict.fromkeys(bulk_load.TASK_COLUMNS)
        row.update(platform=platform, item_id=item, variant=variant, kind=kind, source_key=source_key, day=day,
                   canonical_url=canonical, media_url=media, backup_urls="[]", published_at=f"{day}T12:00:00Z",
                   meta=json.dumps({"title": f"post {item}"}), expected_size=size if rng.random() < 0.5 else None,
                   state=state, attempts=1, run_id=run_id, discovered_at=discovered, queued_at=queued,
                   updated_at=queued)
        claimed = queued + rng.expovariate(1 / 30.0)
        started = claimed + rng.expovariate(1 / 0.5)
        finished = started + rng.expovariate(1 / (8.0 if kind == "video" else 1.0))
        verified = finished + rng.expovariate(1 / 0.3)
        committed = verified + rng.expovariate(1 / 2.0)
        if state in ("committed", "downloaded", "verified"):
            row.update(claimed_at=claimed, started_at=started, finished_at=finished, sha256=sha, size=size,
                       updated_at=finished)
            if state in ("committed", "verified"):
                row.update(verified_at=verified, updated_at=verified)
            if state == "committed":
                row.update(committed_at=committed, updated_at=committed)
                if rng.random() < 0.03:  # retried once before it went through
                    cls = weighted(rng, RETRY_CLASSES)
                    row.update(attempts=2, wait_reason="retry_backoff", wait_since=queued + 1.0, wait_cause=cls)
        elif state == "discovered":
            if rng.random() < 0.15:
                halt = "disk_guard" if rng.random() < 0.2 else "platform_halted"
                cause = "disk_full" if halt == "disk_guard" else rng.choice(["http_5xx", "auth", "network_timeout"])
                row.update(wait_reason=halt, wait_since=queued + 5.0, wait_cause=cause)
        elif state == "downloading":
            owner = f"worker-{rng.randrange(12)}@host{rng.randrange(3)}"
            expires = claimed + 120.0 if rng.random() < 0.33 else now + rng.uniform(10, 110)
            if expires > now - 1 and expires < now:  # avoid the boundary
                expires = now - 60
            if expires > now:
                claimed = now - rng.uniform(1, 600)
            row.update(lease_owner=owner, lease_expires_at=expires, claimed_at=claimed, started_at=claimed + 0.2,
                       updated_at=claimed)
        else:  # retry_wait, failed, gone: failed_at after the claim, at one of the stages
            classes = {"retry_wait": RETRY_CLASSES, "failed": FAILED_CLASSES, "gone": GONE_CLASSES}[state]
            cls = weighted(rng, classes)
            stage = rng.random()
            failed_at = started + 2.0
            row.update(claimed_at=claimed, started_at=started, attempts=rng.randrange(1, 6))
            if cls in ("hash_mismatch", "bad_signature", "corrupt_media", "unsupported_media") or stage < 0.1:
                row.update(finished_at=finished)
                failed_at = finished + 0.5
            if cls == "storage_error":
                row.update(finished_at=finished, verified_at=verified)
                failed_at = verified + 0.5
            failed_at = min(failed_at, now - 1.0)
            row.update(error_class=cls, error_code={"http_5xx": "503", "rate_limited": "429", "not_found": "404",
                                                    "auth": "401"}.get(cls),
                       error_message=f"{MESSAGES[cls]} ({media[:60]})", failed_at=failed_at, updated_at=failed_at)
            if state == "retry_wait":
                retry_after = 120.0 if cls == "rate_limited" else None
                # Backoff ahead for the recent ones, passed (due) for most older ones.
                next_at = failed_at + (retry_after or rng.choice([30.0, 300.0, 1800.0, 7200.0]))
                row.update(next_attempt_at=next_at, wait_reason="retry_backoff", wait_since=failed_at, wait_cause=cls,
                           retry_after_s=retry_after)
        yield row


def feed_error_rows(now: float, seed: int = 17, count: int = 600):
    rng = random.Random(seed)
    sources = source_keys(random.Random(16))
    today = date.fromtimestamp(now)
    for _ in range(count):
        platform, source_key, _ = sources[rng.randrange(len(sources))]
        at = now - rng.random() * DAYS * DAY_S * (0.05 if rng.random() < 0.3 else 1.0)
        cls = weighted(rng, (("http_5xx", 40), ("network_timeout", 20), ("rate_limited", 20), ("parse_error", 12),
                             ("auth", 8)))
        resolved = at + rng.uniform(60, 7200) if rng.random() < 0.65 and at + 7200 < now else None
        day = (today - timedelta(days=1 + int((now - at) // DAY_S) % DAYS)).isoformat()
        yield {"source_key": source_key, "day": day, "platform": platform, "error_class": cls,
               "platform_code": {"rate_limited": "-412", "auth": "-101"}.get(cls), "message": MESSAGES[cls],
               "raw_body": '{"code":0,"data":{"list_v2":[]}}' if cls == "parse_error" else None,
               "run_id": hashlib.md5(f"{source_key}|{day}|feed".encode()).hexdigest(), "at": at,
               "resolved_at": resolved}


def write_sources_yaml(path: Path, url: str, store: Path) -> None:
    import yaml

    sources = [{platform: ident if platform == "urls" else (f"page {ident}" if platform == "facebook" else
                                                              f"user {ident}")}
               for platform, _key, ident in source_keys(random.Random(16))]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"store": str(store), "ledger_url": url, "sources": sources}))


def create_database(url: str) -> None:
    target = make_url(normalize_url(url))
    admin = create_engine(target.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{target.database}"'))
        conn.execute(text(f'CREATE DATABASE "{target.database}"'))
    admin.dispose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="ledger URL: sqlite:////path/ledger.db or postgresql://user@host/db")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=50_000)
    parser.add_argument("--now", type=float, default=None, help="unix time the ledger ends at (default: now)")
    parser.add_argument("--create-db", action="store_true", help="PostgreSQL: drop and create the database first")
    parser.add_argument("--sources-yaml", type=Path, help="also write a sources.yaml naming the 10,000 sources")
    parser.add_argument("--store", type=Path, default=None, help="store root for --sources-yaml")
    args = parser.parse_args(argv)
    now = time.time() if args.now is None else args.now
    postgres = args.url.startswith("postgres")
    if postgres and args.create_db:
        create_database(args.url)
    if not postgres:
        path = Path(args.url.split("///", 1)[-1])
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
    started = time.monotonic()
    ledger = Ledger(args.url)  # the real schema and migrations
    bulk_load.load_tasks(ledger, rows(args.rows, now), args.batch,
                         progress=lambda written: print(f"  {written:,} rows", file=sys.stderr, flush=True))
    bulk_load.load_feed_errors(ledger, feed_error_rows(now))
    bulk_load.load_rate_budgets(ledger, [
        {"platform": p, "tokens": 4.0, "updated_at": now - 30, "rate": 5.0, "base_rate": 5.0, "burst": 10.0,
         "slow_until": 0.0, "in_flight": 0} for p in SOURCES_PER_PLATFORM])
    bulk_load.analyze(ledger)
    print(f"{args.rows:,} rows into {make_url(normalize_url(args.url)).render_as_string(hide_password=True)} "
          f"in {time.monotonic() - started:.0f} s (now={now:.0f})", file=sys.stderr)
    if args.sources_yaml:
        write_sources_yaml(args.sources_yaml, args.url, args.store or args.sources_yaml.parent / "store")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The workloads of bench/scale.py: the generated worlds, the latencies and every row (what
`python -m bench scale --list` prints). Here so scale.py holds only how a row is run."""
from __future__ import annotations

# name -> settings. accounts are per platform; items = 4 platforms x accounts x days x posts x media (about).
WORLDS = {
    "1k": dict(accounts=16, days=4, posts_per_day=2, media_per_post=2),
    "10k": dict(accounts=160, days=4, posts_per_day=2, media_per_post=2),
    "40k": dict(accounts=640, days=4, posts_per_day=2, media_per_post=2),
    "100k": dict(accounts=1600, days=4, posts_per_day=2, media_per_post=2),
    # The same item counts over 2 days with twice the accounts: partitions twice as big.
    "10k-2d": dict(accounts=320, days=2, posts_per_day=2, media_per_post=2),
    "100k-2d": dict(accounts=3200, days=2, posts_per_day=2, media_per_post=2),
    "10k-1d": dict(accounts=640, days=1, posts_per_day=2, media_per_post=2),
}
LATENCY_MS = 100.0  # before every media answer: the I/O-bound world the worker rows ask for
API_LATENCY_MS = 50.0  # before every API answer (feed pages, play URLs): a real API takes 100-300 ms
# The ranged-run rows' shard layouts (issue 28): bilibili has three times the sources of the others.
RANGED_10K = dict(bilibili=12, weibo=4, facebook=4, urls=4)
RANGED_100K = dict(bilibili=120, weibo=40, facebook=40, urls=40)


def _ranged(world: str, workers: int, shards: dict, shards_per_run: int = 4, **more) -> dict:
    """A daemon row of ranged runs through the code server (issue 28's rows)."""
    return dict(kind="daemon", world=world, workers=workers, code_server=True, shards_per_run=shards_per_run,
                **more, shards=shards)


ROWS = {  # --all runs them in this order
    "pg-1k-w1": dict(kind="daemon", world="1k", workers=1),
    "pg-1k-w4": dict(kind="daemon", world="1k", workers=4),
    "pg-10k-w1": dict(kind="daemon", world="10k", workers=1),
    "pg-10k-w4": dict(kind="daemon", world="10k", workers=4),
    "crawl-10k": dict(kind="crawl", world="10k", workers=1),
    "celery-10k-w2": dict(kind="celery", world="10k", workers=2),
    "sensors-10k": dict(kind="sensors"),
    # ~100k items is cut to ~40k in --all: on 2 shared cores the crawler side needs ~35 ms CPU per
    # item, so 100k takes ~30 min at 4 workers (> 15 min) and ~70 min at 1 worker. --row pg-100k-w4 runs it.
    "pg-40k-w4": dict(kind="daemon", world="40k", workers=4),
}
# The 100k row against pg-10k-w4: 10 shards per platform keep 160 sources (~860 items) per
# partition, as the 10k row's 1 shard does, so the two differ in the ledger's size, the
# registered sources and the partition count, not in how long a partition works.
EXTRA_ROWS = {"pg-100k-w4": dict(kind="daemon", world="100k", workers=4, shards=10),
              # The 1-vs-4-worker pair on 64 partitions (4 shards, 40 sources each) instead of 16: with
              # 16, the backfill's tail (the last of bilibili's 4 long partitions, dequeued in day
              # order) bounds the 4-worker row, not the workers.
              "pg-10k-w1-s4": dict(kind="daemon", world="10k", workers=1, shards=4),
              "pg-10k-w4-s4": dict(kind="daemon", world="10k", workers=4, shards=4),
              # Balanced partitions (docs/SHARDS.md, "Picking the shard count"): a bilibili source yields
              # 2.7x the items of the others (a part is video + audio), so bilibili gets 3x their shards,
              # and 2 days of twice the accounts make every partition ~1,070-1,180 items (24 s of
              # work at 4 threads): 12 partitions at 10k, 120 at 100k, no platform's runs longer than
              # the others'. The three rows run in one invocation (--row ... --row ...).
              "pg-10k-w1-b": dict(kind="daemon", world="10k-2d", workers=1,
                                  shards=dict(bilibili=3, weibo=1, facebook=1, urls=1)),
              "pg-10k-w4-b": dict(kind="daemon", world="10k-2d", workers=4,
                                  shards=dict(bilibili=3, weibo=1, facebook=1, urls=1)),
              "pg-100k-w4-b": dict(kind="daemon", world="100k-2d", workers=4,
                                   shards=dict(bilibili=30, weibo=10, facebook=10, urls=10)),
              # The same three with the code server as a service of its own (deploy/README.md): the daemon
              # no longer replaces its code server every 60 s.
              "pg-10k-w1-cs": dict(kind="daemon", world="10k-2d", workers=1, code_server=True,
                                   shards=dict(bilibili=3, weibo=1, facebook=1, urls=1)),
              "pg-10k-w4-cs": dict(kind="daemon", world="10k-2d", workers=4, code_server=True,
                                   shards=dict(bilibili=3, weibo=1, facebook=1, urls=1)),
              "pg-100k-w4-cs": dict(kind="daemon", world="100k-2d", workers=4, code_server=True,
                                    shards=dict(bilibili=30, weibo=10, facebook=10, urls=10)),
              # The 1-vs-4-worker pair at the latencies of a real platform from afar (250 ms per media
              # answer, 150 ms per API answer; still I/O-bound, media >= 100 ms): at 100/50 ms the four runs'
              # feed walks and launches together saturate 2 cores, and the 4-worker row measures that.
              "pg-10k-w1-slow": dict(kind="daemon", world="10k-2d", workers=1, code_server=True,
                                     latency_ms=250.0, api_latency_ms=150.0,
                                     shards=dict(bilibili=3, weibo=1, facebook=1, urls=1)),
              "pg-10k-w4-slow": dict(kind="daemon", world="10k-2d", workers=4, code_server=True,
                                     latency_ms=250.0, api_latency_ms=150.0,
                                     shards=dict(bilibili=3, weibo=1, facebook=1, urls=1)),
              # Issue 28: ranged runs. The -cs rows' world and run sizes (~1,100 items a run, 12 runs), each run
              # now 4 partitions of one platform and day (bilibili 12 shards, the others 4; shards_per_run 4):
              # 48 partitions in 12 runs, so the figures per run compare with the -cs rows' one-partition runs.
              "pg-10k-w1-r": _ranged("10k-2d", 1, RANGED_10K),
              "pg-10k-w4-r": _ranged("10k-2d", 4, RANGED_10K),
              "pg-100k-w4-r": _ranged("100k-2d", 4, RANGED_100K),
              # The same with CeleryRunLauncher (deploy/celery_run_launcher.yaml): each run in a warm Celery
              # pool process, `workers` run workers of one slot each.
              "pg-10k-w1-r-cl": _ranged("10k-2d", 1, RANGED_10K, run_launcher="celery"),
              "pg-10k-w4-r-cl": _ranged("10k-2d", 4, RANGED_10K, run_launcher="celery"),
              "pg-100k-w4-r-cl": _ranged("100k-2d", 4, RANGED_100K, run_launcher="celery"),
              # Runs twice as long (~2,300 items, a minute of work at 4 threads): 1 day of 640 sources a
              # platform, 6 runs. Fewer runs than 4 workers can overlap twice: for the share, not for 4 vs 1.
              "pg-10k-w4-r1d": _ranged("10k-1d", 4, RANGED_10K),
              # Runs of ~2,200 items at 100k (shards_per_run 8: 60 runs of 8 partitions), the run length
              # docs/SHARDS.md asks of a slow host; pg-10k-w4-r1d is its 10k counterpart (6 runs of ~2,300).
              "pg-100k-w4-r8": _ranged("100k-2d", 4, RANGED_100K, shards_per_run=8),
              "pg-100k-w4-r8-cl": _ranged("100k-2d", 4, RANGED_100K, shards_per_run=8, run_launcher="celery"),
              "pg-10k-w4-r1d-cl": _ranged("10k-1d", 4, RANGED_10K, run_launcher="celery"),
              # The daemon with nothing to run, 640 sources: its per-second CPU (queue, sensors, monitoring).
              "daemon-idle-10k": dict(kind="idle", world="10k", workers=4, seconds=90)}

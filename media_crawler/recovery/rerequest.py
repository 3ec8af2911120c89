"""When to ask for another run of a partition whose ledger still holds unfinished items.

The `unfinished_partitions_sensor` (defs/jobs.py) is the part of recovery that
needs no operator: after a failed run, a killed worker or an hour of 500s,
it re-requests the partition, and the stages redo only what is unfinished.
It must not flood the queue, so per partition it waits BASE_WAIT_S after
first noticing the partition, then doubles the wait after each request up to
MAX_WAIT_S (an hour of outage costs about five runs, not thirty), and it asks
for at most MAX_PER_TICK partitions per tick. A partition with a run queued
or in progress is left alone, and a partition that finished forgets its
backoff, so the next trouble starts again from a short wait.

The state lives in the sensor's cursor as JSON: {"source|day": {"n": requests, "at": unix}}.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable

BASE_WAIT_S = 120.0
MAX_WAIT_S = 3600.0
MAX_PER_TICK = 5

# The sensor reads time through this, so tests can move it forward.
clock: Callable[[], float] = time.time


@dataclass(frozen=True)
class Rerequest:
    source_key: str
    day: str
    number: int  # how many times this partition was re-requested before (for the run key)


def wait_after(requests: int) -> float:
    """Seconds between noticing (0 requests so far) or the n-th request and the next one."""
    return min(MAX_WAIT_S, BASE_WAIT_S * (2 ** requests))


def plan_rerequests(unfinished: Iterable[tuple[str, str]], state: dict, now: float, *,
                    registered: set[str], in_flight: set[tuple[str, str]],
                    limit: int = MAX_PER_TICK) -> tuple[list[Rerequest], dict]:
    """(partitions to request now, the new cursor state) for unfinished (source_key, day) pairs."""
    unfinished = [pair for pair in unfinished if pair[0] in registered]
    new_state = {key: entry for key, entry in state.items() if tuple(key.split("|", 1)) in set(unfinished)}
    due: list[Rerequest] = []
    for source_key, day in unfinished:
        key = f"{source_key}|{day}"
        entry = new_state.get(key)
        if entry is None:
            new_state[key] = {"n": 0, "at": now}  # noticed: first request after BASE_WAIT_S
            continue
        if (source_key, day) in in_flight or len(due) >= limit:
            continue
        if now - entry["at"] < wait_after(entry["n"]):
            continue
        due.append(Rerequest(source_key, day, entry["n"]))
        new_state[key] = {"n": entry["n"] + 1, "at": now}
    return due, new_state

"""Deterministic randomness for the simulated world.

Every id, timestamp, key and pixel derives from (seed, a stable text key), never from
the order in which things are built, so adding a post does not reshuffle the others.
`random.Random(str)` hashes its seed with SHA-512, independent of PYTHONHASHSEED, so
the same seed gives the same world in every process.
"""
from __future__ import annotations

import hashlib
import random
import string
from datetime import date, datetime, time, timedelta, timezone

# Bilibili's BV alphabet (base58 without 0, I, O, l), in its published order.
BV_ALPHABET = "FcwAPNKTMug3GV5Lj7EJnHpWsx4tb8haYeviqBz6rkCy12mUSDQX9RdoZf"
BASE62 = string.digits + string.ascii_letters
BASE36 = string.digits + string.ascii_lowercase

# The demo content is planned over three day "slots" (0 = oldest, 2 = --end-date).
PLAN_SLOTS = 3


class Seeded:
    def __init__(self, seed: int, end_date: date, days: int) -> None:
        if days < 1:
            raise ValueError("days must be >= 1")
        self.seed = seed
        self.end_date = end_date
        self.days = [end_date - timedelta(days=offset) for offset in range(days - 1, -1, -1)]

    def rng(self, key: str) -> random.Random:
        return random.Random(f"{self.seed}/{key}")

    def secret(self, key: str) -> bytes:
        return hashlib.sha256(f"{self.seed}/secret/{key}".encode()).digest()

    def digits(self, key: str, count: int) -> str:
        rng = self.rng(key)
        return str(rng.randint(1, 9)) + "".join(rng.choice(string.digits) for _ in range(count - 1))

    def number(self, key: str, count: int) -> int:
        return int(self.digits(key, count))

    def hex(self, key: str, count: int) -> str:
        rng = self.rng(key)
        return "".join(rng.choice("0123456789abcdef") for _ in range(count))

    def text(self, key: str, count: int, alphabet: str = BASE62) -> str:
        rng = self.rng(key)
        return "".join(rng.choice(alphabet) for _ in range(count))

    def day(self, slot: int) -> date:
        """The calendar day of plan slot 0..2, spread over however many days were asked for."""
        last = len(self.days) - 1
        return self.days[round(slot * last / (PLAN_SLOTS - 1))]

    def moment(self, slot: int, key: str, hour: int) -> datetime:
        """A UTC instant on the slot's day at `hour`, with seeded minutes and seconds.

        Minutes stay in 1..58 so nothing lands exactly on a day boundary, where
        inclusive/exclusive window edges would make expected counts ambiguous.
        """
        rng = self.rng(f"moment/{key}")
        start = datetime.combine(self.day(slot), time(hour, 0), tzinfo=timezone.utc)
        return start + timedelta(minutes=rng.randint(1, 58), seconds=rng.randint(0, 59))

"""A test's own ledger move: the given columns, written as they are.

For rows a test puts where no stage's transition (store/transitions.py) puts them
on its own: a bare state, a lease that expired, a counter bumped in a race.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class Columns:
    values: Mapping[str, Any]

    def columns(self) -> dict[str, Any]:
        return dict(self.values)


def columns(**values: Any) -> Columns:
    return Columns(values)

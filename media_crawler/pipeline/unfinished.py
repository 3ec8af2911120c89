"""Partitions whose ledger rows are not finished: what the re-request sensor and
`media-crawler rerun-failed` act on."""
from __future__ import annotations

from sqlalchemy import func, select

from media_crawler.store.ledger import FINISHED_STATES, STATES, Ledger, T

# Named, not "not finished": an IN list over the few unfinished states can use the
# state index, where NOT IN reads every row of a million-row ledger on each sensor tick.
UNFINISHED_STATES = [state for state in STATES if state not in FINISHED_STATES]


def unfinished_partitions(ledger: Ledger) -> list[tuple[str, str, int]]:
    """(source_key, day, unfinished item count), oldest day first."""
    query = (select(T.c.source_key, T.c.day, func.count()).where(T.c.state.in_(UNFINISHED_STATES))
             .group_by(T.c.source_key, T.c.day).order_by(T.c.day, T.c.source_key))
    with ledger.engine.connect() as conn:
        return [(row[0], row[1], row[2]) for row in conn.execute(query)]

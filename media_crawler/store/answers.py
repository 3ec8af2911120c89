"""The ledger's rows of the API answers kept as fetched (mc_api_answers, schema version 7).

A row names its answer's body by sha256 (a blob of the answer store,
store/open_store.py `open_answer_store`) and holds what is not the body: the
platform, the scrubbed URL, when it was fetched, the status line and the headers
(scrubbed by pipeline/answers.py before they get here).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterator

from media_crawler.store import schema
from media_crawler.store.ledger import Ledger
from media_crawler.store.time_pages import rows_by_time

A = schema.api_answers


@dataclass(frozen=True)
class KeptAnswer:
    platform: str
    url: str
    fetched_at: float
    status: int
    reason: str
    headers: tuple[tuple[str, str], ...]
    sha256: str
    size: int


def record_answer(ledger: Ledger, answer: KeptAnswer) -> None:
    with ledger.engine.begin() as conn:
        conn.execute(A.insert().values(
            platform=answer.platform, url=answer.url, fetched_at=answer.fetched_at, status=answer.status,
            reason=answer.reason, headers=json.dumps([list(pair) for pair in answer.headers], ensure_ascii=False),
            sha256=answer.sha256, size=answer.size))


def kept_answers(ledger: Ledger, *, since: float | None = None, until: float | None = None,
                 platform: str | None = None) -> Iterator[KeptAnswer]:
    """The kept answers fetched in [since, until) (of `platform`), oldest first, streamed a
    page per transaction (as reports/reads.py `committed_rows`, and for the same reason)."""
    for row in rows_by_time(ledger.engine, A, A.c.fetched_at, since=since, until=until, platform=platform):
        yield KeptAnswer(platform=row.platform, url=row.url, fetched_at=row.fetched_at, status=row.status,
                         reason=row.reason, headers=tuple((str(n), str(v)) for n, v in json.loads(row.headers)),
                         sha256=row.sha256, size=row.size)


"""The exporter's delay histograms kept across scrapes, and in the ledger (mc_cursors),
so that no scrape reads every committed row."""
from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from media_crawler.store import schema
from media_crawler.store.reports.delays import (COMMIT_SETTLE_S, DELAY_BUCKETS, committed_at_of_row, delay_histograms,
                                                merge_histograms)

# Where CommittedDelays keeps its fold in the ledger (mc_cursors: a key and a text value),
# so that a new exporter, or each `metrics --once`, starts from it instead of reading
# every committed row again; FOLD_SAVE_S: how far the fold must have advanced to be saved.
# Version 2 keeps whether the fold has caught up with the ledger (FOLD_CHUNK_ROWS).
FOLD_SOURCE_KEY, FOLD_NAME, FOLD_VERSION = "__metrics__", "delay_histograms", 2
FOLD_SAVE_S = 300.0
FOLD_CHUNK_ROWS = 50_000  # rows a scrape folds at most (~0.3 s here) while catching up
FOLD_SAVE_BUSY_MS = 2000  # SQLite: a scrape waits this long at most for the write lock, then skips the save


class CommittedDelays:
    """The exporter's delay histograms, kept across scrapes: rows committed up to
    COMMIT_SETTLE_S ago are folded in once, newer rows are counted afresh on each
    scrape. A row whose batch reaches the ledger more than COMMIT_SETTLE_S after its
    stamp is left out; one that leaves the committed state later is not taken out
    again (counters do not go down).

    The fold is kept in the ledger too (mc_cursors, FOLD_SOURCE_KEY): a scrape reads
    the fold and the rows committed since it (the committed_at index), whichever
    exporter saved it, or a `metrics --once`. Every exporter folds the same rows, so
    they agree; a fold saved with other buckets or by another version is read afresh.
    A ledger that takes no write (a read-only role, a busy SQLite file) just keeps the
    fold in memory.

    A ledger never folded before (a restored or upgraded one, a new exporter version)
    is folded FOLD_CHUNK_ROWS rows per scrape, oldest commits first, so no scrape reads
    a million rows (5 s here, past a Prometheus scrape timeout): until it has caught
    up (`caught_up`, the media_crawler_delay_histograms_complete gauge), the histograms
    hold the rows folded so far and grow by a chunk per scrape, as counters may."""

    def __init__(self, engine: Engine, settle_s: float = COMMIT_SETTLE_S, buckets: tuple[float, ...] = DELAY_BUCKETS,
                 persist: bool = True, chunk_rows: int | None = None) -> None:
        self.engine, self.settle_s, self.buckets, self.persist = engine, settle_s, buckets, persist
        self.chunk_rows = chunk_rows or FOLD_CHUNK_ROWS
        self._folded: dict | None = None
        self._upto: float | None = None  # rows committed up to here are in the fold (None: none yet)
        self._saved_upto = 0.0
        self.caught_up = False

    def current(self, now: float) -> dict[str, dict[tuple[str, str], dict]]:
        upto = now - self.settle_s
        if self._folded is None and self.persist:
            stored = self._load()
            if stored is not None:
                self._folded, self._upto, self.caught_up = stored
                self._saved_upto = self._upto
        if self._folded is None:
            self._folded, self._upto, self.caught_up = {"stage": {}, "wait": {}}, None, False
        if not self.caught_up:
            edge = committed_at_of_row(self.engine, after=self._upto, row=self.chunk_rows)
            chunk_upto = upto if edge is None or edge >= upto else edge
            more = delay_histograms(self.engine, self.buckets, committed_after=self._upto, committed_upto=chunk_upto)
            self._folded, self._upto = merge_histograms(self._folded, more), chunk_upto
            self.caught_up = chunk_upto == upto
            if self.persist:
                self._save()  # a chunk is costly: never fold it twice
            if not self.caught_up:
                return self._folded  # the rest is folded on the next scrapes
        elif upto > self._upto:
            more = delay_histograms(self.engine, self.buckets, committed_after=self._upto, committed_upto=upto)
            self._folded, self._upto = merge_histograms(self._folded, more), upto
        if self.persist and self._upto - self._saved_upto >= FOLD_SAVE_S:
            self._save()
        return merge_histograms(self._folded, delay_histograms(self.engine, self.buckets,
                                                               committed_after=self._upto))

    def _load(self) -> tuple[dict, float, bool] | None:
        import json

        C = schema.cursors
        try:
            with self.engine.connect() as conn:
                value = conn.execute(select(C.c.value).where(C.c.source_key == FOLD_SOURCE_KEY,
                                                             C.c.name == FOLD_NAME)).scalar()
            if value is None:
                return None
            data = json.loads(value)
            if data.get("version") != FOLD_VERSION or tuple(data.get("buckets") or ()) != tuple(self.buckets):
                return None
            folded = {kind: {(platform, name): {"buckets": list(counts), "sum": float(total), "count": int(count)}
                             for platform, name, counts, total, count in data[kind]} for kind in ("stage", "wait")}
            return folded, float(data["upto"]), bool(data.get("caught_up"))
        except Exception:  # unreadable or odd: fold afresh (the fold is a cache of the ledger's rows)
            return None

    def _save(self) -> None:
        """Keep the fold, unless one saved meanwhile (by another exporter) reaches further."""
        import json

        C = schema.cursors
        value = json.dumps({"version": FOLD_VERSION, "buckets": list(self.buckets), "upto": self._upto,
                            "caught_up": self.caught_up,
                            **{kind: [[platform, name, entry["buckets"], entry["sum"], entry["count"]]
                                      for (platform, name), entry in self._folded[kind].items()]
                               for kind in ("stage", "wait")}}, separators=(",", ":"))
        where = (C.c.source_key == FOLD_SOURCE_KEY, C.c.name == FOLD_NAME)
        sqlite = self.engine.dialect.name == "sqlite"
        try:
            with self.engine.connect() as conn:
                # On the DBAPI connection: a statement through SQLAlchemy would begin (BEGIN IMMEDIATE) first.
                raw = conn.connection.dbapi_connection if sqlite else None
                if raw is not None:
                    raw.execute(f"PRAGMA busy_timeout={FOLD_SAVE_BUSY_MS}")
                try:
                    with conn.begin():
                        updated = conn.execute(C.update().where(*where, C.c.updated_at < self._upto)
                                               .values(value=value, updated_at=self._upto)).rowcount
                        if not updated and conn.execute(select(func.count()).where(*where)).scalar_one() == 0:
                            conn.execute(C.insert().values(source_key=FOLD_SOURCE_KEY, name=FOLD_NAME, value=value,
                                                           updated_at=self._upto))
                finally:
                    if raw is not None:
                        raw.execute("PRAGMA busy_timeout=30000")
            self._saved_upto = self._upto
        except Exception:  # read-only, locked, or two first scrapes inserting at once: keep it in memory
            self._saved_upto = self._upto  # tried: the next try when the fold has advanced again


def drop_saved_fold(engine: Engine) -> None:
    """Forget the fold kept in the ledger: the next scrape folds the committed rows again, chunk
    by chunk, as on a ledger never folded before (after a restore; `python -m bench ledger_queries`)."""
    C = schema.cursors
    with engine.begin() as conn:
        conn.execute(C.delete().where(C.c.source_key == FOLD_SOURCE_KEY, C.c.name == FOLD_NAME))

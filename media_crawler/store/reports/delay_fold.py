"""The exporter's delay histograms kept across scrapes, and in the ledger (mc_cursors),
so that only the first scrape on a ledger reads its committed rows."""
from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from media_crawler.store import schema
from media_crawler.store.reports.delays import COMMIT_SETTLE_S, DELAY_BUCKETS, delay_histograms, merge_histograms

# Where CommittedDelays keeps its fold in the ledger (mc_cursors: a key and a text value),
# so that a new exporter, or each `metrics --once`, starts from it instead of reading
# every committed row again; FOLD_SAVE_S: how far the fold must have advanced to be saved.
FOLD_SOURCE_KEY, FOLD_NAME, FOLD_VERSION = "__metrics__", "delay_histograms", 1
FOLD_SAVE_S = 300.0
FOLD_SAVE_BUSY_MS = 2000  # SQLite: a scrape waits this long at most for the write lock, then skips the save


class CommittedDelays:
    """The exporter's delay histograms, kept across scrapes: rows committed up to
    COMMIT_SETTLE_S ago are folded in once, newer rows are counted afresh on each
    scrape. A row whose batch reaches the ledger more than COMMIT_SETTLE_S after its
    stamp is left out; one that leaves the committed state later is not taken out
    again (counters do not go down).

    The fold is kept in the ledger too (mc_cursors, FOLD_SOURCE_KEY): only the first
    scrape on a ledger reads every committed row; any later one, of this exporter, of
    another, or a `metrics --once`, reads the fold and the rows committed since it (the
    committed_at index). Every exporter folds the same rows, so they agree; a fold
    saved with other buckets or by another version is read afresh. A ledger that takes
    no write (a read-only role, a busy SQLite file) just keeps the fold in memory."""

    def __init__(self, engine: Engine, settle_s: float = COMMIT_SETTLE_S, buckets: tuple[float, ...] = DELAY_BUCKETS,
                 persist: bool = True) -> None:
        self.engine, self.settle_s, self.buckets, self.persist = engine, settle_s, buckets, persist
        self._folded: dict | None = None
        self._upto = 0.0
        self._saved_upto = 0.0

    def current(self, now: float) -> dict[str, dict[tuple[str, str], dict]]:
        upto = now - self.settle_s
        if self._folded is None and self.persist:
            stored = self._load()
            if stored is not None:
                self._folded, self._upto = stored
                self._saved_upto = self._upto
        if self._folded is None:
            self._folded, self._upto = delay_histograms(self.engine, self.buckets, committed_upto=upto), upto
        elif upto > self._upto:
            more = delay_histograms(self.engine, self.buckets, committed_after=self._upto, committed_upto=upto)
            self._folded, self._upto = merge_histograms(self._folded, more), upto
        if self.persist and (self._saved_upto == 0.0 or self._upto - self._saved_upto >= FOLD_SAVE_S):
            self._save()
        return merge_histograms(self._folded, delay_histograms(self.engine, self.buckets,
                                                               committed_after=self._upto))

    def _load(self) -> tuple[dict, float] | None:
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
            return folded, float(data["upto"])
        except Exception:  # unreadable or odd: fold afresh (the fold is a cache of the ledger's rows)
            return None

    def _save(self) -> None:
        """Keep the fold, unless one saved meanwhile (by another exporter) reaches further."""
        import json

        C = schema.cursors
        value = json.dumps({"version": FOLD_VERSION, "buckets": list(self.buckets), "upto": self._upto,
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

"""The ledger: per-item state, the seen-set, leases and cursors.

Every stage advances rows of one partition (source_key, day) from one state to
the next; see docs/DESIGN.md for the state machine. Writes are batched: one
transaction per batch of items, never one commit per file.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import operator
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, NamedTuple, Sequence, Union

from sqlalchemy import bindparam, func, select, update

from media_crawler.errors import CrawlError
from media_crawler.models import ItemError, MediaRecord, iso_utc
from media_crawler.crashpoints import MID_LEDGER_BATCH, crash_point
from media_crawler.scrub import excerpt, mask_secrets, scrub_url
from media_crawler.store import schema
from media_crawler.store.database import get_engine, lock_ids_in_order, migrate
# The states, importable from here as before (most callers know the ledger, not states.py).
from media_crawler.store.states import (  # noqa: F401
    COMMITTED, DISCOVERED, DOWNLOADED, DOWNLOADING, FAILED, FINISHED_STATES, GONE, RETRY_WAIT, STATES, VERIFIED)

if TYPE_CHECKING:  # transitions.py takes its states from states.py, so this edge is one-way
    from media_crawler.store.transitions import Transition

T = schema.tasks

# The variant of a row the crawler made rather than downloaded: a DASH group's
# tracks muxed into one MP4 (pipeline/mux_tracks.py). Its blob, if lost, is made
# again from the tracks, never downloaded.
MUX_VARIANT = "mux"
# Rows one claim leases at most: a longer list is claimed in several passes.
CLAIM_LIMIT = 10_000


@dataclass(frozen=True)
class Task:
    """A ledger row as the stages see it."""

    id: int
    platform: str
    item_id: str
    variant: str
    kind: str
    source_key: str
    day: str
    canonical_url: str
    media_url: str
    backup_urls: tuple[str, ...]
    group_key: str | None
    resolve_ref: str | None
    resolved_at: float | None
    meta: Mapping[str, Any]
    expected_sha256: str | None
    expected_size: int | None
    state: str
    attempts: int
    sha256: str | None
    size: int | None
    etag: str | None
    error_class: str | None

    @property
    def staging_name(self) -> str:
        # Staging names come from the row id: never from a URL or a title.
        return f"task-{self.id}"

    def as_record(self) -> MediaRecord:
        return MediaRecord(
            platform=self.platform, item_id=self.item_id, variant=self.variant, kind=self.kind,
            canonical_url=self.canonical_url, media_url=self.media_url, backup_urls=self.backup_urls,
            group=self.group_key, resolve_ref=self.resolve_ref, expected_sha256=self.expected_sha256,
            expected_size=self.expected_size, meta=self.meta,
        )


SourceScope = Union[str, Sequence[str], None]


def where_sources(query, source_key: SourceScope):
    """Narrow a query to one source key, a list of them (a shard's), or leave it (None)."""
    if source_key is None:
        return query
    if isinstance(source_key, str):
        return query.where(T.c.source_key == source_key)
    return query.where(T.c.source_key.in_(list(source_key)))


# The columns a Task is made of, in the order of its fields: the stages' queries select
# these and no others (a claim read all 45 columns of each row for 22 of them).
TASK_FIELDS = tuple(task_field.name for task_field in dataclasses.fields(Task))
TASK_COLUMNS = tuple(T.c[name] for name in TASK_FIELDS)
_BACKUP_URLS, _META = TASK_FIELDS.index("backup_urls"), TASK_FIELDS.index("meta")


def task_from_row(row: Any) -> Task:
    """The Task of a row selected as TASK_COLUMNS.

    Its fields are set as the frozen dataclass's own __init__ would, without that
    __init__'s object.__setattr__ call per field (22 of them, a third of the cost of
    each of the hundreds of Tasks a claim makes); an empty JSON list or object is
    not parsed (most rows hold those)."""
    values = list(row)
    backup_urls = values[_BACKUP_URLS]
    values[_BACKUP_URLS] = tuple(json.loads(backup_urls)) if backup_urls and backup_urls != "[]" else ()
    meta = values[_META]
    values[_META] = json.loads(meta) if meta and meta != "{}" else {}
    task = object.__new__(Task)
    task.__dict__.update(zip(TASK_FIELDS, values))
    return task


class DiscoveredRow(NamedTuple):
    """A listed item's row as its discovery batch left it: what the item's fetch line says."""

    id: int
    state: str
    attempts: int
    discovered_at: float | None
    queued_at: float | None


@dataclass
class DiscoverySummary:
    new: int = 0
    skipped_seen: int = 0  # already committed or gone: the seen-set held them
    in_progress: int = 0  # known and not finished: left for the later stages
    requeued: int = 0  # failed before; this run tries them again
    # (platform, item_id, variant) -> the row as this batch's transaction left it, so the
    # fetch lines need no read after it. A listed identity is missing when a concurrent
    # run inserted it first: this transaction never saw that row.
    rows: dict[tuple[str, str, str], DiscoveredRow] = field(default_factory=dict)


class Ledger:
    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = get_engine(url)
        migrate(self.engine)

    # -- discovery -----------------------------------------------------------
    def record_discovered(
        self, records: Sequence[MediaRecord], *, source_key: str, day: str, run_id: str | None = None
    ) -> DiscoverySummary:
        """Insert new records; refresh the signed URL of unfinished ones; skip seen ones."""
        summary = DiscoverySummary()
        now = time.time()
        with self.engine.begin() as conn:
            # Batched: one look-up for the batch, one multi-row insert, one
            # executemany per kind of update; never a statement per record.
            existing = _existing_rows(conn, records)
            fresh: dict[tuple[str, str, str], MediaRecord] = {}
            latest_url: dict[tuple[str, str, str], MediaRecord] = {}
            updates: list[tuple[int, str | None, Mapping[str, Any]]] = []
            for record in records:
                key = _identity(record)
                row = existing.get(key)
                if row is None:
                    if key in fresh:  # listed twice in one batch: one row, the later URL
                        latest_url[key] = record
                        summary.in_progress += 1
                    else:
                        fresh[key] = record
                    continue
                if row.state in FINISHED_STATES:
                    summary.skipped_seen += 1
                    continue
                values: dict[str, Any] = {
                    "media_url": record.media_url and mask_secrets(record.media_url),
                    "backup_urls": mask_secrets(json.dumps(list(record.backup_urls))),
                    "resolved_at": now, "updated_at": now,
                }
                if row.state in (FAILED, RETRY_WAIT):
                    # A new run of the partition gives failed items a fresh budget.
                    values.update(state=DISCOVERED, attempts=0, next_attempt_at=None, queued_at=now)
                    summary.requeued += 1
                    # As the update leaves it (listed twice: the second is in progress).
                    existing[key] = row._replace(state=DISCOVERED, attempts=0, queued_at=now)
                else:
                    summary.in_progress += 1
                updates.append((row.id, None, values))
            rows = []
            for key in sorted(fresh):  # new rows in identity order: their locks, below
                record = fresh[key]
                columns = _record_columns(record)
                if key in latest_url:
                    later = latest_url[key]
                    columns.update(media_url=later.media_url and mask_secrets(later.media_url),
                                   backup_urls=mask_secrets(json.dumps(list(later.backup_urls))))
                rows.append(_new_row(columns, source_key=source_key, day=day, run_id=run_id, now=now))
            # Row locks in one order: the rows to refresh by id, the new ones by identity.
            lock_ids_in_order(conn, T, (row_id for row_id, _owner, _values in updates))
            inserted = _insert_absent(conn, rows)
            summary.new += len(inserted)
            summary.in_progress += len(rows) - len(inserted)  # a concurrent run inserted them first
            _update_many(conn, updates, now)
        for key, row_id in inserted.items():
            existing[key] = DiscoveredRow(row_id, DISCOVERED, 0, now, now)
        summary.rows = existing
        return summary

    def insert_if_absent(
        self, records: Sequence[MediaRecord], *, source_key: str, day: str, run_id: str | None = None
    ) -> list[MediaRecord]:
        """Insert, in state discovered, the records whose identity (platform,
        item_id, variant) the ledger does not hold yet; return those inserted.

        One multi-row `INSERT ... ON CONFLICT DO NOTHING` (SQLite and
        PostgreSQL alike): rows already present, including ones a concurrent
        transaction just inserted, are left exactly as they are.
        """
        now = time.time()
        by_key: dict[tuple[str, str, str], MediaRecord] = {}
        for record in records:
            by_key.setdefault(_identity(record), record)
        rows = [_new_row(_record_columns(record), source_key=source_key, day=day, run_id=run_id, now=now)
                for record in by_key.values()]
        with self.engine.begin() as conn:
            inserted = _insert_absent(conn, rows)
        return [record for key, record in by_key.items() if key in inserted]

    def insert_committed(self, record: MediaRecord, *, source_key: str, day: str, sha256: str, size: int,
                         run_id: str | None = None) -> bool:
        """Insert a row that is committed from the start: a blob the crawler made
        from committed ones (a muxed MP4), never downloaded. False when the
        identity is already there (a concurrent run made it first)."""
        now = time.time()
        row = {**_new_row(_record_columns(record), source_key=source_key, day=day, run_id=run_id, now=now),
               "state": COMMITTED, "sha256": sha256, "size": size, "finished_at": now, "verified_at": now,
               "committed_at": now}
        with self.engine.begin() as conn:
            return bool(_insert_absent(conn, [row]))

    # -- stage transitions (batched) ----------------------------------------
    def apply(self, changes: Iterable[tuple[int, str | None, "Transition"]]) -> int:
        """Apply many (task_id, expected_owner_or_None, transition) moves in one
        transaction (store/transitions.py). A row whose lease moved to another owner
        is left alone: the other owner's result wins, so two runs never both advance it."""
        changed = 0
        now = time.time()
        changes = [(task_id, owner, transition.columns()) for task_id, owner, transition in changes]
        half = len(changes) // 2
        with self.engine.begin() as conn:
            lock_ids_in_order(conn, T, (task_id for task_id, _owner, _values in changes))
            # Consecutive changes of one shape (same columns, guarded or not) go
            # out as one executemany: thousands of rows cost a few statements.
            changed += _update_many(conn, changes[:half], now)
            if half:
                crash_point(MID_LEDGER_BATCH)  # recovery tests: the transaction must roll back whole
            changed += _update_many(conn, changes[half:], now)
        return changed

    def tasks(self, *, source_key: SourceScope = None, day: str | None = None, states: Sequence[str] | None = None,
              limit: int | None = None) -> list[Task]:
        query = where_sources(select(*TASK_COLUMNS), source_key)
        if day is not None:
            query = query.where(T.c.day == day)
        if states is not None:
            query = query.where(T.c.state.in_(list(states)))
        query = query.order_by(T.c.id)
        if limit:
            query = query.limit(limit)
        with self.engine.connect() as conn:
            return [task_from_row(row) for row in conn.execute(query)]

    def state_counts(self, *, source_key: SourceScope = None, day: str | None = None) -> dict[str, int]:
        query = select(T.c.state, func.count()).group_by(T.c.state)
        if source_key is not None:
            query = where_sources(query, source_key).where(T.c.day == day)
        with self.engine.connect() as conn:
            return {state: count for state, count in conn.execute(query)}

    # -- cursors (platforms.base.CursorStore) -------------------------------
    def get_cursor(self, source_key: str, name: str) -> str | None:
        C = schema.cursors
        with self.engine.connect() as conn:
            row = conn.execute(select(C.c.value).where(C.c.source_key == source_key, C.c.name == name)).first()
        return row[0] if row else None

    def set_cursor(self, source_key: str, name: str, value: str) -> None:
        C = schema.cursors
        with self.engine.begin() as conn:
            value = mask_secrets(value)  # a paging cursor may be a URL holding the token
            done = conn.execute(update(C).where(C.c.source_key == source_key, C.c.name == name).values(
                value=value, updated_at=time.time())).rowcount
            if not done:
                conn.execute(C.insert().values(source_key=source_key, name=name, value=value, updated_at=time.time()))

    # -- page-level failures ---------------------------------------------------
    def record_feed_error(self, *, source_key: str, day: str, platform: str, error: CrawlError,
                          raw_body: str | None = None, run_id: str | None = None) -> None:
        with self.engine.begin() as conn:
            conn.execute(schema.feed_errors.insert().values(
                source_key=source_key, day=day, platform=platform, error_class=error.error_class.value,
                platform_code=error.platform_code, message=excerpt(error.message, 2000),
                raw_body=(raw_body or None) and excerpt(raw_body, 100_000), run_id=run_id, at=time.time()))

    def record_item_errors(self, *, source_key: str, day: str, errors: Sequence[ItemError],
                           run_id: str | None = None) -> None:
        """Items of a page that read but could not be normalized: they reach `failures`
        (stage fetch) until a later walk of the feed no longer finds them."""
        if not errors:
            return
        now = time.time()
        with self.engine.begin() as conn:
            conn.execute(schema.feed_errors.insert(), [{
                "source_key": source_key, "day": day, "platform": error.platform, "error_class": error.error_class,
                "platform_code": error.platform_code, "message": excerpt(error.message, 2000),
                "item_id": excerpt(error.item_id, 200), "run_id": run_id, "at": now} for error in errors])

    def resolve_feed_errors(self, *, source_key: str, day: str) -> None:
        F = schema.feed_errors
        with self.engine.begin() as conn:
            conn.execute(update(F).where(F.c.source_key == source_key, F.c.day == day, F.c.resolved_at.is_(None))
                         .values(resolved_at=time.time()))


def _record_columns(record: MediaRecord) -> dict[str, Any]:
    """A record's row values, every text through the scrubber: a feed may have echoed
    a credential into a URL, a title or an id, and the ledger is storage. A media URL
    that carried one keeps `***` in its place: fetching it sends no secret anywhere."""
    columns = {
        "platform": record.platform, "item_id": record.item_id, "variant": record.variant, "kind": record.kind,
        "canonical_url": scrub_url(record.canonical_url), "media_url": record.media_url,
        "backup_urls": json.dumps(list(record.backup_urls)) if record.backup_urls else "[]",
        "group_key": record.group, "resolve_ref": record.resolve_ref, "published_at": iso_utc(record.published_at),
        "meta": _meta_json(dict(record.meta)),
        "expected_sha256": record.expected_sha256, "expected_size": record.expected_size,
    }
    # The texts a feed chose, masked by value: all looked at in one pass (one scrubber call,
    # not one per column), and each masked on its own only when that pass found a secret.
    # A secret in one of them is in the joined text; one the join would make across two of
    # them only costs the masks.
    texts = [columns[name] for name in _FEED_TEXTS if columns[name]]
    joined = "\n".join(texts)
    if mask_secrets(joined) != joined:
        for name in _FEED_TEXTS:
            if columns[name]:
                columns[name] = mask_secrets(columns[name])
    return columns


# The columns _record_columns masks by value (the platform, the kind, the date and the
# numbers are the crawler's own vocabulary; canonical_url is scrubbed as a URL).
_FEED_TEXTS = ("item_id", "variant", "media_url", "backup_urls", "group_key", "resolve_ref", "meta")


# json.dumps(meta, ensure_ascii=False, default=str) without building an encoder per row
# (json.dumps makes a new one whenever an option differs from its defaults).
_meta_json = json.JSONEncoder(ensure_ascii=False, default=str).encode


def _identity(record: MediaRecord) -> tuple[str, str, str]:
    return (record.platform, record.item_id, record.variant)


def _new_row(columns: dict[str, Any], *, source_key: str, day: str, run_id: str | None, now: float) -> dict[str, Any]:
    return {**columns, "source_key": source_key, "day": day, "state": DISCOVERED, "attempts": 0, "run_id": run_id,
            "discovered_at": now, "queued_at": now, "resolved_at": now, "updated_at": now}


_LOOKUP_CHUNK = 500  # item ids per IN (...): far below every database's parameter limit


def _existing_rows(conn, records: Sequence[MediaRecord]) -> dict[tuple[str, str, str], DiscoveredRow]:
    """(platform, item_id, variant) -> its row, for the records the ledger already holds.

    Read with the driver's own execute (_insert_absent says why): SQLAlchemy rendered and
    coerced each id of the IN list in Python, a quarter of a fresh batch's ledger time."""
    wanted: dict[str, set[str]] = {}
    for record in records:
        wanted.setdefault(record.platform, set()).add(record.item_id)
    found: dict[tuple[str, str, str], DiscoveredRow] = {}
    cursor = conn.connection.cursor()
    try:
        for platform, item_ids in wanted.items():
            ids = sorted(item_ids)
            for start in range(0, len(ids), _LOOKUP_CHUNK):
                chunk = ids[start:start + _LOOKUP_CHUNK]
                cursor.execute(_lookup_sql(conn.dialect, len(chunk)), [platform, *chunk])
                for row_id, state, attempts, discovered_at, queued_at, item_id, variant in cursor.fetchall():
                    found[(platform, item_id, variant)] = DiscoveredRow(row_id, state, attempts, discovered_at,
                                                                        queued_at)
    finally:
        cursor.close()
    return found


@functools.lru_cache(maxsize=64)
def _lookup_sql(dialect, ids: int) -> str:
    """The SELECT of _existing_rows for one platform and `ids` item ids."""
    quote = dialect.identifier_preparer.quote
    mark = _placeholder(dialect)
    names = ("id", "state", "attempts", "discovered_at", "queued_at", "item_id", "variant")
    return (f"SELECT {', '.join(quote(name) for name in names)} FROM {quote(T.name)} "
            f"WHERE {quote('platform')} = {mark} AND {quote('item_id')} IN ({', '.join([mark] * ids)})")


# The ledger's identity: its unique key, what insert-if-absent conflicts on.
IDENTITY_COLUMNS = ("platform", "item_id", "variant")
# DB-API placeholders by paramstyle: psycopg2 (pyformat) takes `%s` with a sequence too.
_PLACEHOLDER = {"qmark": "?", "format": "%s", "pyformat": "%s"}


def _placeholder(dialect) -> str:
    """The positional parameter marker of the ledger's driver (SQLite's or psycopg2)."""
    if dialect.name not in ("postgresql", "sqlite") or dialect.paramstyle not in _PLACEHOLDER:
        raise NotImplementedError(f"the ledger's raw statements are written for SQLite and PostgreSQL, "
                                  f"not {dialect.name} ({dialect.paramstyle})")
    return _PLACEHOLDER[dialect.paramstyle]


def _insert_absent(conn, rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str, str], int]:
    """INSERT ... ON CONFLICT (identity) DO NOTHING for many rows; identity -> row id of
    those really inserted (RETURNING gives only them: a row a concurrent transaction
    inserted first is left exactly as it is).

    Multi-row VALUES statements sent with the driver's own execute on the transaction's
    connection: SQLAlchemy's executemany ("insertmanyvalues") processed every parameter
    of every row in Python again, half of discovery's ledger time, for values (numbers,
    strings, None) that need no processing. SQLite (3.35+, RETURNING) and PostgreSQL
    read the same statement, but for SQLite's OR IGNORE (`_insert_sql`)."""
    if not rows:
        return {}
    dialect = conn.dialect
    if dialect.name == "sqlite":
        _check_required(dialect, rows)
    columns = tuple(sorted(set().union(*rows)))
    # Rows per statement: within the driver's parameter limit (999 on an old SQLite).
    per_statement = max(1, min(dialect.insertmanyvalues_page_size,
                               dialect.insertmanyvalues_max_parameters // len(columns)))
    pick = operator.itemgetter(*columns)  # a tuple: a row has three columns at least (its identity)
    inserted: dict[tuple[str, str, str], int] = {}
    cursor = conn.connection.cursor()
    try:
        for start in range(0, len(rows), per_statement):
            chunk = rows[start:start + per_statement]
            params: list[Any] = []
            for row in chunk:
                # A row with every column (its keys are among them) is read in C; another
                # gets None for the columns it lacks.
                params += pick(row) if len(row) == len(columns) else [row.get(name) for name in columns]
            cursor.execute(_insert_sql(dialect, columns, len(chunk)), params)
            for row_id, platform, item_id, variant in cursor.fetchall():
                inserted[(platform, item_id, variant)] = row_id
    finally:
        cursor.close()
    return inserted


# The columns a new row must have (NOT NULL; the id is the database's to give).
_REQUIRED = tuple(column.name for column in T.columns if not column.nullable and not column.primary_key)


def _check_required(dialect, rows: Sequence[Mapping[str, Any]]) -> None:
    """Refuse, as the database's NOT NULL would, a row lacking a required column: under
    SQLite's OR IGNORE (`_insert_sql`) that row would be skipped without a word."""
    for row in rows:
        if None in map(row.get, _REQUIRED):
            missing = next(name for name in _REQUIRED if row.get(name) is None)
            raise dialect.dbapi.IntegrityError(f"NOT NULL constraint failed: {T.name}.{missing}")


# SQLite: a statement that writes several rows and may stop half way (a NOT NULL column:
# ABORT) needs a statement journal inside a transaction, to undo its own half, kept in
# memory up to 64 KiB and then in a new temporary file (/var/tmp/etilqs_*, a new inode):
# a discovery batch's INSERT and a claim's UPDATE of 512 rows made one each (issue 31's
# strace: 34 files and 6,838 writes for 5,000 items). With OR IGNORE no constraint
# aborts, so none is needed; what it would ignore cannot happen: the identity's conflict
# is the upsert's (DO NOTHING), the id is SQLite's own, a claim sets constant non-NULL
# values and a new row's required columns are checked first (`_check_required`).
# Single-row statements would need none either, but cost SQLite 4 to 8 µs more per row.
SQLITE_NO_ABORT = "OR IGNORE"


@functools.lru_cache(maxsize=64)
def _insert_sql(dialect, columns: tuple[str, ...], rows: int) -> str:
    """The INSERT of `rows` rows of `columns`, absent ones only, returning (id, identity)."""
    quote = dialect.identifier_preparer.quote
    group = "(" + ", ".join([_placeholder(dialect)] * len(columns)) + ")"
    verb = f"INSERT {SQLITE_NO_ABORT}" if dialect.name == "sqlite" else "INSERT"
    return (f"{verb} INTO {quote(T.name)} ({', '.join(quote(name) for name in columns)}) "
            f"VALUES {', '.join([group] * rows)} "
            f"ON CONFLICT ({', '.join(quote(name) for name in IDENTITY_COLUMNS)}) DO NOTHING "
            f"RETURNING {', '.join(quote(name) for name in ('id', *IDENTITY_COLUMNS))}")


def _update_many(conn, changes: Sequence[tuple[int, str | None, Mapping[str, Any]]], now: float) -> int:
    """Ledger.apply's statements: each run of consecutive changes with the same
    columns (and owner guard or none) is one executemany of one UPDATE.

    The UPDATE is compiled once per shape and sent with the driver's own executemany
    on the transaction's connection: SQLAlchemy's executemany processed every row's
    parameters in Python again, a tenth of a second per thousand items on the
    download path, for columns (numbers and strings) that need no processing. Each
    change's parameters are then picked from its values by one itemgetter, in the
    statement's order (`_UpdateShape`)."""
    changed = 0
    start = 0
    while start < len(changes):
        shape = _shape(changes[start])
        end = start + 1
        while end < len(changes) and _shape(changes[end]) == shape:
            end += 1
        update_shape = _compiled_update(conn.dialect, *shape)
        pick, param_names = update_shape.pick, update_shape.param_names
        # updated_at: the change's own when it has one (discovery's), else this batch's.
        picked = [pick({"updated_at": now, **values, _TASK_ID: task_id, _OWNER: owner})
                  for task_id, owner, values in changes[start:end]]
        params = picked if param_names is None else [dict(zip(param_names, row)) for row in picked]
        cursor = conn.connection.cursor()
        try:
            cursor.executemany(update_shape.sql, params)
            changed += max(cursor.rowcount, 0)
        finally:
            cursor.close()
        start = end
    return changed


# A change's id and owner, beside its column values in the mapping `_UpdateShape.pick`
# reads: keys no column can have.
_TASK_ID, _OWNER = " task_id", " owner"


@dataclass(frozen=True)
class _UpdateShape:
    """One change shape's UPDATE in the driver's SQL and parameter style.

    pick: a change's parameters, as a tuple in the statement's order, from its column
    values and its id and owner (under _TASK_ID and _OWNER). param_names: the names of
    those parameters for a named parameter style, None for a positional one."""

    sql: str
    pick: Callable[[Mapping[str, Any]], tuple]
    param_names: tuple[str, ...] | None


@functools.lru_cache(maxsize=256)
def _compiled_update(dialect, guarded: bool, names: tuple[str, ...]) -> _UpdateShape:
    stmt = update(T).where(T.c.id == bindparam("b_task_id"))
    if guarded:
        stmt = stmt.where(T.c.lease_owner == bindparam("b_owner"))
    stmt = stmt.values({**{name: bindparam(f"v_{name}") for name in names}, "updated_at": bindparam("v_updated_at")})
    compiled = stmt.compile(dialect=dialect)
    params = tuple(compiled.positiontup) if compiled.positional else tuple(compiled.params)
    sources = {"b_task_id": _TASK_ID, "b_owner": _OWNER}
    # Two parameters at least (the id and updated_at): itemgetter then always returns a tuple.
    pick = operator.itemgetter(*(sources.get(param) or param.removeprefix("v_") for param in params))
    return _UpdateShape(compiled.string, pick, None if compiled.positional else params)


def _shape(change: tuple[int, str | None, Mapping[str, Any]]) -> tuple[bool, tuple[str, ...]]:
    _task_id, owner, values = change
    return (owner is not None, tuple(sorted(values)))

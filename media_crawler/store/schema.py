"""The ledger's tables (SQLAlchemy Core: the same definitions run on SQLite and PostgreSQL).

Schema changes are versioned: bump SCHEMA_VERSION and add a step to
`store.migrations.MIGRATIONS`; never rely on create_all over an existing schema.
"""
from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    event,
    text,
)

from media_crawler.store.states import FINISHED_STATES, STATES

SCHEMA_VERSION = 9
metadata = MetaData()
# Rows that are not finished (states.py: every state but committed and gone), as SQL:
# the predicate of ix_mc_tasks_unfinished and of the queries it serves.
UNFINISHED_PREDICATE = "state IN ({})".format(
    ", ".join(f"'{state}'" for state in STATES if state not in FINISHED_STATES))

schema_version = Table(
    "mc_schema_version",
    metadata,
    Column("version", Integer, primary_key=True),
    Column("applied_at", Float, nullable=False),
)

# One row per media variant. Timestamps are unix seconds (float): cheap to
# compare on both databases and to turn into stage delays.
tasks = Table(
    "mc_tasks",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("platform", String(16), nullable=False),
    Column("item_id", String(200), nullable=False),
    Column("variant", String(100), nullable=False),
    Column("kind", String(8), nullable=False),
    Column("source_key", String(120), nullable=False),
    Column("day", String(10), nullable=False),
    Column("canonical_url", Text, nullable=False),
    Column("media_url", Text, nullable=False),
    Column("backup_urls", Text),  # JSON list
    Column("group_key", String(200)),
    Column("resolve_ref", String(300)),
    Column("resolved_at", Float),
    Column("published_at", String(25)),
    Column("meta", Text),  # JSON
    Column("expected_sha256", String(64)),
    Column("expected_size", BigInteger),
    Column("state", String(16), nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("next_attempt_at", Float),
    Column("error_class", String(32)),
    Column("error_code", String(32)),
    Column("error_message", Text),
    Column("lease_owner", String(120)),
    Column("lease_expires_at", Float),
    Column("run_id", String(64)),
    Column("sha256", String(64)),
    Column("size", BigInteger),
    Column("etag", String(200)),
    Column("discovered_at", Float),
    Column("queued_at", Float),
    Column("claimed_at", Float),
    Column("started_at", Float),
    Column("finished_at", Float),
    Column("verified_at", Float),
    Column("committed_at", Float),
    Column("failed_at", Float),
    Column("updated_at", Float),
    # Version 3: why an unfinished row waits, where a stage set it (store/waits.py):
    # the reason, since when, the error class behind it (the one that halted its
    # platform, or its own retried failure) and the server's Retry-After.
    Column("wait_reason", String(24)),
    Column("wait_since", Float),
    Column("wait_cause", String(32)),
    Column("retry_after_s", Float),
    # Version 8: what the media response that completed the item said (JSON: status,
    # content_type, etag, last_modified, date), for the archive's response record;
    # unlike `etag` (the resume validator) compaction keeps it.
    Column("media_response", Text),
    UniqueConstraint("platform", "item_id", "variant", name="uq_mc_tasks_identity"),
    Index("ix_mc_tasks_partition_state", "source_key", "day", "state"),
    Index("ix_mc_tasks_state_lease", "state", "lease_expires_at"),
    Index("ix_mc_tasks_sha256", "sha256"),
    # Version 2: `failures --since`, `status` and `export --since` ask what failed or
    # was committed in a time window; without these they read every row of the ledger.
    Index("ix_mc_tasks_failed_at", "failed_at"),
    Index("ix_mc_tasks_committed_at", "committed_at"),
    # Version 4: `status` and `metrics` count rows by state and platform, and sum sizes;
    # on SQLite this covering index answers that without reading a million rows.
    Index("ix_mc_tasks_state_platform", "state", "platform", "size"),
    # Version 6: the leased rows only. Every download step asks which owners hold leases
    # (release_dead_leases) and every heartbeat finds its owner's rows: without this
    # both read the whole ledger (0.2 s and 0.45 s at a million rows, bench/SCALE.md).
    Index("ix_mc_tasks_lease_owner", "lease_owner", "lease_expires_at"),  # WHERE: PARTIAL_INDEXES
    # Version 7: the unfinished rows only, with what the unfinished-partitions sensor
    # (every minute) and `rerun-failed` count them by: the query is answered from this
    # small index alone (covering), never from the table, however many finished rows the
    # ledger holds and whether or not it was ever ANALYZEd. The predicate is spelled once
    # (UNFINISHED_PREDICATE): a query must state it literally for the planner to see that
    # it implies the index's (SQLite, PostgreSQL). Led by state: SQLite's planner, without
    # statistics, takes an index it can search by the IN list over one it must scan.
    Index("ix_mc_tasks_unfinished", "state", "day", "source_key"),  # WHERE: PARTIAL_INDEXES
)

# The partial indexes' predicates (both databases take the same SQL). Given to an index
# for the database it is created on, as it is created (`_with_predicate`), not in its
# definition: SQLAlchemy imports every dialect a definition names (postgresql_where=...),
# and the PostgreSQL one is ~130 M instructions that a SQLite ledger never needs
# (fetch-urls' start-up, issue 31).
PARTIAL_INDEXES = {"ix_mc_tasks_lease_owner": "lease_owner IS NOT NULL", "ix_mc_tasks_unfinished": UNFINISHED_PREDICATE}


def _with_predicate(index: Index, connection, **_kw) -> None:
    """Before CREATE INDEX: the index's WHERE, for the dialect of the connection."""
    index.dialect_options[connection.dialect.name]["where"] = text(PARTIAL_INDEXES[index.name])


for _index in tasks.indexes:
    if _index.name in PARTIAL_INDEXES:
        event.listen(_index, "before_create", _with_predicate)

# Indexes added by a schema version after 1 (store/database.py MIGRATIONS).
INDEXES_SINCE = {2: ("ix_mc_tasks_failed_at", "ix_mc_tasks_committed_at"), 4: ("ix_mc_tasks_state_platform",),
                 6: ("ix_mc_tasks_lease_owner",), 7: ("ix_mc_tasks_unfinished",)}
# mc_tasks columns added by a schema version after 1 (all nullable, no default:
# adding one is a change of the catalog only, on SQLite and PostgreSQL alike).
COLUMNS_SINCE = {3: ("wait_reason", "wait_since", "wait_cause", "retry_after_s"), 8: ("media_response",)}
# Columns of other tables added after version 1, by version: (table, column).
OTHER_COLUMNS_SINCE = {5: (("mc_feed_errors", "item_id"),)}

# Per-source incremental cursors (newest item seen, paging tokens).
cursors = Table(
    "mc_cursors",
    metadata,
    Column("source_key", String(120), primary_key=True),
    Column("name", String(60), primary_key=True),
    Column("value", Text, nullable=False),
    Column("updated_at", Float, nullable=False),
)

# Page-level failures of media_records (a feed page, not an item, failed).
feed_errors = Table(
    "mc_feed_errors",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("source_key", String(120), nullable=False),
    Column("day", String(10), nullable=False),
    Column("platform", String(16), nullable=False),
    Column("error_class", String(32), nullable=False),
    Column("platform_code", String(32)),
    Column("message", Text),
    Column("raw_body", Text),  # kept for parse errors (schema drift), already scrubbed
    Column("run_id", String(64)),
    Column("at", Float, nullable=False),
    Column("resolved_at", Float),
    # Version 5: an item of a page that could not be normalized (the page itself was
    # read): its platform id when it has one, "" when it has none. NULL: the page failed.
    Column("item_id", String(200)),
    Index("ix_mc_feed_errors_partition", "source_key", "day"),
)

# Shared per-platform request budget (token bucket), so every worker and run
# on one ledger database draws from one budget.
rate_budget = Table(
    "mc_rate_budget",
    metadata,
    Column("platform", String(16), primary_key=True),
    Column("tokens", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("rate", Float, nullable=False),  # requests per second, currently in force
    Column("base_rate", Float, nullable=False),
    Column("burst", Float, nullable=False),
    Column("slow_until", Float, nullable=False, default=0.0),
    Column("in_flight", Integer, nullable=False, default=0),
)


# Version 4: partitions are (shard, day) (media_crawler/shards.py). The ledger, not
# Dagster, holds what a source is: the shard counts in force, which sources were
# registered, and which (source, day) feed walks finished in which run, so a step
# retry of media_records walks again only the feeds that failed.
layout = Table(
    "mc_layout",
    metadata,
    Column("platform", String(16), primary_key=True),
    Column("shards", Integer, nullable=False),
    Column("recorded_at", Float, nullable=False),
)

sources = Table(
    "mc_sources",
    metadata,
    Column("source_key", String(120), primary_key=True),
    Column("platform", String(16), nullable=False),
    Column("registered_at", Float, nullable=False),
)

source_days = Table(
    "mc_source_days",
    metadata,
    Column("source_key", String(120), primary_key=True),
    Column("day", String(10), primary_key=True),
    Column("feed_done_at", Float, nullable=False),
    Column("run_id", String(64)),  # the run whose walk finished: its step retries skip this feed
    Column("items_new", Integer, nullable=False, default=0),
)

# Version 8: every API answer kept as fetched (pipeline/answers.py): its body is a blob of
# the answer store (named by its sha256, so identical answers are stored once), its
# status and headers (secrets scrubbed) are here, with the scrubbed URL and the time.
api_answers = Table(
    "mc_api_answers",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("platform", String(16), nullable=False),
    Column("url", Text, nullable=False),
    Column("fetched_at", Float, nullable=False),
    Column("status", Integer, nullable=False),
    Column("reason", String(100), nullable=False),
    Column("headers", Text, nullable=False),  # JSON list of [name, value], in the order received
    Column("sha256", String(64), nullable=False),
    Column("size", BigInteger, nullable=False),
    Index("ix_mc_api_answers_fetched_at", "fetched_at"),
    Index("ix_mc_api_answers_sha256", "sha256"),
)

# Version 9 (answer release marks): what `compact --answers-older-than` releases from the
# answer store, so that keeping an answer needs no call to the store inside its row's
# transaction (store/answers.py, store/answer_release.py). A mark is written `pending`
# (committed) before the sweep deletes the blob, and replaced by a released one, under a
# new id, in the transaction that deleted it. Ids only grow (AUTOINCREMENT on SQLite, a
# sequence on PostgreSQL; marks are written by one sweep at a time): a keeper compares
# the newest id it saw before storing a blob with the marks its row's transaction sees.
answer_releases = Table(
    "mc_answer_releases",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("sha256", String(64), nullable=False),
    Column("pending", Integer, nullable=False),  # 1: about to be deleted, 0: deleted
    Column("marked_at", Float, nullable=False),  # unix time; released marks are pruned after a day
    Index("ix_mc_answer_releases_sha256", "sha256"),
    sqlite_autoincrement=True,
)
TABLES_SINCE = {4: ("mc_layout", "mc_sources", "mc_source_days"), 8: ("mc_api_answers",),
                9: ("mc_answer_releases",)}
# The mc_layout row of a ledger that had rows before version 4 (per-source partitions).
LEGACY_LAYOUT = "*per-source*"

"""Reports read from the ledger: what `status`, `failures`, `metrics` and `health` show.

Every report is a query function here (SQLAlchemy Core, SQLite and PostgreSQL alike,
`now` passed in so tests need no clock); observe/ formats and combines them with
Dagster's run storage, and holds no SQL. Modules by concern: counts (rows by state,
age and outcome), platform_signals (auth, rate limits, outages; their state from platform_incidents:
the latest signals decide), waiting (why each
unfinished row waits), delays and delay_fold (time between stages), failures
(failing items and feed pages, grouped).
"""

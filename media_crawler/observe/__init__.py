"""Observability: what is failing, where, since when, and why items wait.

logging/events: the JSON line stream (secrets masked by media_crawler/scrub.py, log lag measured);
progress: terminal lines and progress events; failures, ledger_stats, status, metrics, health:
reports computed from the ledger; waits: the reason each unfinished item waits; dagster_runs:
Dagster's queued runs, run queue and step start delays, read from its run storage.
"""

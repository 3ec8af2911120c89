"""Observability: what is failing, where, since when, and why items wait.

logging/events: the JSON line stream (secrets masked by media_crawler/scrub.py, log lag measured);
progress: terminal lines and progress events; status, metrics, health (reading store/reports/):
reports computed from the ledger; wait_summary: the waits by reason and by Dagster run; dagster_runs:
Dagster's queued runs, run queue and step start delays, read from its run storage.
"""

"""Observability: what is failing, where, and since when.

logging/events: the JSON line stream (secrets masked by media_crawler/scrub.py); progress: terminal lines and progress events;
failures, ledger_stats, status, metrics, health: reports computed from the ledger.
"""

"""Observability: what is failing, where, and since when.

logging/events/scrub: the JSON line stream; progress: terminal lines and progress events;
failures, ledger_stats, status, metrics, health: reports computed from the ledger.
"""

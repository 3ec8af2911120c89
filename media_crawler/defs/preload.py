"""What a Celery run worker loads once, in its main process, before it forks its pool.

deploy/celery_run_launcher.yaml names this module in `config_source.imports`, which Celery's
worker imports at start, before it forks its pool processes (prefork). Each pool process then
begins with the code location imported and built, where without it the first run of every pool
process paid for both (bench/run_worker_start.py --celery; deploy/README.md "Runs in Celery
workers"). Every later run of a pool process finds the same Definitions (definitions.py caches
them per partition layout).

Only what every run loads anyway: the code location's modules and its Definitions for the
sources.yaml of the worker's environment, and Dagster's PostgreSQL storage, which each run's
instance imports. Nothing here opens a connection, a file handle or a thread, which a forked
process would share. A sources.yaml that cannot be read is left to the first run, which
reports it as any run does.
"""
from __future__ import annotations

import dagster_postgres  # noqa: F401  the instance's storage (deploy/dagster.postgres.yaml)

from media_crawler.config import ConfigError
from media_crawler.definitions import defs

try:
    defs()
except ConfigError:
    pass

"""Throwaway PostgreSQL databases for tests that must run on the production database too."""
from __future__ import annotations

import uuid

PG_ADMIN = {"host": "127.0.0.1", "port": 5432, "user": "postgres", "dbname": "postgres"}


class PostgresDatabases:
    """Creates `mc_test_<random>` databases on demand; drops them all at the end."""

    def __init__(self) -> None:
        import psycopg2

        self._admin = psycopg2.connect(**PG_ADMIN)
        self._admin.autocommit = True  # CREATE/DROP DATABASE cannot run inside a transaction
        self.names: list[str] = []

    def create(self) -> str:
        name = f"mc_test_{uuid.uuid4().hex[:12]}"
        with self._admin.cursor() as cursor:
            cursor.execute(f'CREATE DATABASE "{name}"')
        self.names.append(name)
        return f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}"

    def drop_all(self) -> None:
        """Every database made, dropped at once from connections of their own: a DROP DATABASE
        waits for a checkpoint, and drops waiting together share one."""
        from concurrent.futures import ThreadPoolExecutor

        from media_crawler.store.database import dispose_engines

        dispose_engines()
        self._admin.close()
        with ThreadPoolExecutor(max_workers=DROPS_AT_ONCE) as pool:
            list(pool.map(_drop, self.names))


# Connections the drops take at once (PostgreSQL's default max_connections is 100, shared).
DROPS_AT_ONCE = 8


def _drop(name: str) -> None:
    import psycopg2

    admin = psycopg2.connect(**PG_ADMIN)
    try:
        admin.autocommit = True
        with admin.cursor() as cursor:
            # FORCE: a daemon or run worker killed by the test may leave a session behind.
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.close()

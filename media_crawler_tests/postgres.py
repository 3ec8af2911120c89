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
        from media_crawler.store.database import dispose_engines

        dispose_engines()
        with self._admin.cursor() as cursor:
            for name in self.names:
                # FORCE: a daemon or run worker killed by the test may leave a session behind.
                cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self._admin.close()

"""Database URLs, read the way the engines read them (SQLAlchemy's URL parser).

Backup, restore and reconcile need to know what a ledger URL points at (a
SQLite file, a PostgreSQL database) without connecting to it, and to show or
hand one to pg_dump without leaking its password; `status` and `health` show one,
and mask its password in errors quoting it.
"""
from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import make_url


def sqlite_file(url: str) -> Path | None:
    """The file of a sqlite:/// URL (":memory:" included), or None for another database."""
    parsed = make_url(url)
    return Path(parsed.database) if parsed.get_backend_name() == "sqlite" and parsed.database else None


def is_postgres(url: str) -> bool:
    return make_url(url).get_backend_name() == "postgresql"


def same_postgres_database(first: str, second: str) -> bool:
    """Whether two PostgreSQL URLs name one database (host, port, name; drivers and users aside)."""
    a, b = make_url(first), make_url(second)
    return (a.host, a.port or 5432, a.database) == (b.host, b.port or 5432, b.database)


def display_url(url: str) -> str:
    """The URL to show a person (status output is pasted into tickets): the password masked."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # an odd URL is still worth showing, minus anything after '@'
        return url.rsplit("@", 1)[-1]


def is_database_url(url: str) -> bool:
    """Whether SQLAlchemy reads `url` as a database URL at all."""
    try:
        make_url(url)
    except Exception:
        return False
    return True


def url_password(url: str) -> str | None:
    """The URL's password, so a database error quoting the DSN can be masked; None when it has none."""
    try:
        return make_url(url).password
    except Exception:  # not a URL SQLAlchemy can read: nothing to mask
        return None


def libpq_url(url: str) -> tuple[str, str | None]:
    """(the URL for pg_dump / pg_restore: no driver, no password; the password or None).

    The password is for PGPASSWORD: never on a command line other users can read."""
    parsed = make_url(url)
    password = str(parsed.password) if parsed.password else None
    plain = parsed.set(drivername="postgresql", password=None)
    return plain.render_as_string(hide_password=False), password

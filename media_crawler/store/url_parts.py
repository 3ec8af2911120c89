"""What the observability commands read out of a database URL, parsed as SQLAlchemy parses it."""
from __future__ import annotations

from sqlalchemy.engine import make_url


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


def redacted_url(url: str) -> str:
    """The URL without its password (status output is pasted into tickets)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # an odd URL is still worth showing, minus anything after '@'
        return url.rsplit("@", 1)[-1]

"""The process environment: every variable the crawler reads is named here, once, with
what reading it means, and only this module touches `os.environ` (test_architecture.py).

A core leaf: it imports nothing of the package, so the scrubber, the crash points and
the configuration parser can all read the environment without importing each other.
"""
from __future__ import annotations

import os
from pathlib import Path

CONFIG_ENV = "MEDIA_CRAWLER_CONFIG"
HOME_ENV = "MEDIA_CRAWLER_HOME"
LEDGER_ENV = "MEDIA_CRAWLER_LEDGER_URL"
DAGSTER_HOME_ENV = "DAGSTER_HOME"
WORKERS_ENV = "MEDIA_CRAWLER_WORKERS"
WORKER_NAME_ENV = "MEDIA_CRAWLER_WORKER"
CELERY_CONFIG_ENV = "MEDIA_CRAWLER_CELERY_CONFIG"
CRASH_ENV = "MEDIA_CRAWLER_CRASH_AT"  # crashpoints.py: where the kill-anywhere tests SIGKILL a crawl
DEBUG_ENV = "MEDIA_CRAWLER_DEBUG"
# An S3 store (store/s3/settings.py): the standard AWS variables, the only place its
# endpoint, region and keys come from (never sources.yaml).
AWS_ENVS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE",
            "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE")
AWS_SECRET_ENVS = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
# A private CA (a TLS-inspecting corporate proxy): the variables requests and curl read.
CA_BUNDLE_ENVS = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")


def environment_value(name: str) -> str | None:
    """A variable the configuration names (a credential's `credential_env`, an `env:`
    reference of dagster.yaml): its value, or None when unset or empty."""
    return os.environ.get(name) or None


def environment_copy(**overrides: str) -> dict[str, str]:
    """The environment for a child process: ours, with `overrides`."""
    return {**os.environ, **overrides}


def set_environment(name: str, value: str | None) -> None:
    """Set (None: remove) a variable for this process and the processes it starts."""
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def default_environment(name: str, value: str) -> None:
    os.environ.setdefault(name, value)


def aws_environment() -> dict[str, str]:
    """The AWS variables that are set (AWS_ENVS), by name."""
    return {name: os.environ[name] for name in AWS_ENVS if os.environ.get(name)}


def ca_bundle_override() -> str | None:
    """The CA bundle the environment names for verifying media hosts, else None (certifi's)."""
    return next((os.environ[name] for name in CA_BUNDLE_ENVS if os.environ.get(name)), None)


def config_path_default() -> str:
    """--config's default and the code location's: $MEDIA_CRAWLER_CONFIG, else ./sources.yaml,
    else the one `make demo` wrote (so the README's Dagster CLI line works right after it),
    else ./sources.yaml (whose absence the error then names)."""
    named = os.environ.get(CONFIG_ENV)
    if named:
        return named
    demo = demo_config_path(home_default())
    return str(demo) if not Path("sources.yaml").exists() and demo.is_file() else "sources.yaml"


def home_default() -> str:
    """--home's default: $MEDIA_CRAWLER_HOME, else ./var."""
    return os.environ.get(HOME_ENV) or "var"


def demo_config_path(home: str | os.PathLike) -> Path:
    """Where `media-crawler demo` writes the demo's sources.yaml under its home."""
    return Path(home) / "demo" / "sources.yaml"


def dagster_home_env() -> Path | None:
    value = os.environ.get(DAGSTER_HOME_ENV)
    return Path(value) if value else None


def debug_enabled() -> bool:
    """MEDIA_CRAWLER_DEBUG=1: stack traces in the output (observe/traces.py, cli.py)."""
    return os.environ.get(DEBUG_ENV) == "1"


def workers_override() -> str | None:
    return os.environ.get(WORKERS_ENV) or None


def worker_name_override() -> str | None:
    return os.environ.get(WORKER_NAME_ENV) or None


def celery_config_env() -> str | None:
    return os.environ.get(CELERY_CONFIG_ENV) or None


def crash_point_spec() -> str | None:
    return os.environ.get(CRASH_ENV) or None


def ledger_url_override() -> str | None:
    """$MEDIA_CRAWLER_LEDGER_URL: wins over sources.yaml's `ledger_url`."""
    return os.environ.get(LEDGER_ENV) or None


def home_dir() -> Path:
    return Path(os.environ.get(HOME_ENV, "var")).resolve()


def default_config_path() -> Path:
    return Path(config_path_default())

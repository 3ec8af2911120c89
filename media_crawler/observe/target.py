"""Which ledger and store the observability commands look at.

An operator's shell may hold only the environment (MEDIA_CRAWLER_HOME,
MEDIA_CRAWLER_LEDGER_URL) and no sources.yaml: the commands then use the same
defaults as a crawl would, instead of refusing to answer.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from media_crawler.config import CrawlConfig, config_from_dict, load_config
from media_crawler.environment import CONFIG_ENV, config_path_default
from media_crawler.scrub import register_secret
from media_crawler.store.urls import url_password


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=None,
                        help=f"sources.yaml (default ${CONFIG_ENV}, else ./sources.yaml if present, "
                             "else the defaults under $MEDIA_CRAWLER_HOME)")


def observed_config(explicit_path: str | None) -> CrawlConfig:
    """The named config (which must exist), else $MEDIA_CRAWLER_CONFIG or ./sources.yaml, else defaults."""
    if explicit_path:
        config = load_config(explicit_path)
    else:
        candidate = Path(config_path_default())
        config = load_config(candidate) if candidate.is_file() else config_from_dict({})
    # A database error may quote the DSN; its password must not reach a probe's output.
    register_secret(url_password(config.ledger_url))
    return config

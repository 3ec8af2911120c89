"""`media-crawler normalize PLATFORM FILE...`: debug schema changes on saved responses."""
from __future__ import annotations

import argparse

from media_crawler.platforms.registry import names as platform_names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("platform", choices=platform_names())
    parser.add_argument("files", nargs="+", help="saved API response bodies (JSON)")


def run(args: argparse.Namespace) -> int:
    from media_crawler.platforms.normalize_cli import run_normalize

    return run_normalize(args.platform, args.files)

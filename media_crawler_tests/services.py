"""The one switch for what a test needs from the machine: a service on a port, a binary, an
optional package, root. Absent, the test skips and the name is kept for the summary that
`make test` prints at its end (one line per missing thing, so no skip goes unseen); under
CI (.ci/run sets MEDIA_CRAWLER_REQUIRE_SERVICES=1) the test fails instead, naming it."""
from __future__ import annotations

import importlib
import os
import shutil
import socket
from types import ModuleType
from typing import NoReturn

import pytest

REQUIRE_SERVICES = os.environ.get("MEDIA_CRAWLER_REQUIRE_SERVICES") == "1"

# What was missing -> the message saying how to get it, and how many tests it skipped.
MISSING: dict[str, list] = {}


def missing(name: str, message: str) -> NoReturn:
    entry = MISSING.setdefault(name, [message, 0])
    entry[1] += 1
    if REQUIRE_SERVICES:
        pytest.fail(f"{message}, and CI requires it (MEDIA_CRAWLER_REQUIRE_SERVICES=1)")
    pytest.skip(message)


def require_service(name: str, port: int, host: str = "127.0.0.1") -> None:
    try:
        with socket.create_connection((host, port), timeout=1):
            return
    except OSError:
        missing(name, f"{name} is not listening on {host}:{port}")


def require_binary(name: str, how_to_install: str) -> str:
    path = shutil.which(name)
    if path:
        return path
    missing(name, f"{name} is not installed ({how_to_install})")


def require_module(module: str, how_to_install: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError:
        missing(module, f"the Python package {module} is not installed ({how_to_install})")


def require_root(why: str) -> None:
    if os.getuid() != 0:
        missing("root", f"not running as root: {why}")


def summary_lines() -> list[str]:
    return [f"missing {name}: {message} ({count} test(s) skipped)" for name, (message, count) in MISSING.items()]

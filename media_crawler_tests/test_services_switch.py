"""The one "services required" switch: without it a missing service skips and the run ends
with a line naming it; with it (CI) the same test fails, naming it."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def closed_port() -> socket.socket:
    """A port bound and never listened on: a connection to it is refused, and no other
    process on this shared machine can start listening on it while the probe runs."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


def start_pytest(require: bool, port: int) -> tuple[Path, subprocess.Popen]:
    tests = REPO / "media_crawler_tests" / f"test_zz_switch_probe_{os.getpid()}_{int(require)}.py"
    tests.write_text("from media_crawler_tests.conftest import require_service\n\n"
                     f"def test_needs_it():\n    require_service('Imaginary DB', {port})\n")
    env = {**os.environ, "MEDIA_CRAWLER_REQUIRE_SERVICES": "1" if require else "0"}
    return tests, subprocess.Popen([sys.executable, "-m", "pytest", str(tests)], cwd=REPO, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def probe_runs() -> dict[bool, subprocess.CompletedProcess]:
    """Both probe sessions (switch off and on), started together: each is mostly pytest's own start."""
    started, port = {}, closed_port()
    try:
        for require in (False, True):
            started[require] = start_pytest(require, port.getsockname()[1])
        results = {}
        for require, (_tests, process) in started.items():
            stdout, stderr = process.communicate(timeout=120)
            results[require] = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
        return results
    finally:
        for tests, process in started.values():
            if process.poll() is None:
                process.kill()
                process.wait()
            tests.unlink()
        port.close()


def test_a_missing_service_skips_and_the_run_ends_naming_it(probe_runs):
    result = probe_runs[False]
    assert result.returncode == 0, result.stdout
    assert "1 skipped" in result.stdout
    assert "missing Imaginary DB: Imaginary DB is not listening on 127.0.0.1:" in result.stdout


def test_with_the_switch_a_missing_service_fails_naming_it(probe_runs):
    result = probe_runs[True]
    assert result.returncode == 1, result.stdout
    assert "1 failed" in result.stdout
    assert "Imaginary DB is not listening" in result.stdout and "CI requires it" in result.stdout

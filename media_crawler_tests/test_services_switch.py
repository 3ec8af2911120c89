"""The one "services required" switch: without it a missing service skips and the run ends
with a line naming it; with it (CI) the same test fails, naming it."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens once the socket is closed


def run_pytest(tmp_path: Path, require: bool) -> subprocess.CompletedProcess:
    tests = REPO / "media_crawler_tests" / f"test_zz_switch_probe_{os.getpid()}_{int(require)}.py"
    tests.write_text("from media_crawler_tests.conftest import require_service\n\n"
                     f"def test_needs_it():\n    require_service('Imaginary DB', {closed_port()})\n")
    env = {**os.environ, "MEDIA_CRAWLER_REQUIRE_SERVICES": "1" if require else "0"}
    try:
        return subprocess.run([sys.executable, "-m", "pytest", str(tests)],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    finally:
        tests.unlink()


def test_a_missing_service_skips_and_the_run_ends_naming_it(tmp_path):
    result = run_pytest(tmp_path, require=False)
    assert result.returncode == 0, result.stdout
    assert "1 skipped" in result.stdout
    assert "missing Imaginary DB: Imaginary DB is not listening on 127.0.0.1:" in result.stdout


def test_with_the_switch_a_missing_service_fails_naming_it(tmp_path):
    result = run_pytest(tmp_path, require=True)
    assert result.returncode == 1, result.stdout
    assert "1 failed" in result.stdout
    assert "Imaginary DB is not listening" in result.stdout and "CI requires it" in result.stdout

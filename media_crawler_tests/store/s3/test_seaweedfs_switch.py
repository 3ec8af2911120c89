"""Without SeaweedFS the S3 tests skip naming it; under the services-required switch (CI)
they fail instead (media_crawler_tests/services.py)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
ONE_S3_TEST = "media_crawler_tests/store/s3/test_s3_store.py::test_a_missing_bucket_is_one_storage_error_naming_it"


@pytest.fixture(scope="module")
def sessions(tmp_path_factory) -> dict[bool, subprocess.CompletedProcess]:
    """The one S3 test in a pytest session of its own without a weed binary, switch off and on,
    both sessions started together (each is mostly pytest's and the imports' start)."""
    missing_weed = tmp_path_factory.mktemp("weedless") / "no-weed-here"
    started = {}
    try:
        for require in (False, True):
            env = {**os.environ, "MEDIA_CRAWLER_TEST_WEED": str(missing_weed),
                   "MEDIA_CRAWLER_REQUIRE_SERVICES": "1" if require else "0"}
            started[require] = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", ONE_S3_TEST],
                                                cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                text=True)
        results = {}
        for require, process in started.items():
            stdout, stderr = process.communicate(timeout=300)
            results[require] = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
        return results
    finally:
        for process in started.values():
            if process.poll() is None:
                process.kill()
                process.wait()


@pytest.mark.parametrize("require", [False, True], ids=["developer", "ci"])
def test_a_missing_weed_binary_skips_or_fails_naming_it(sessions, require):
    result = sessions[require]
    assert "SeaweedFS's weed binary is not installed" in result.stdout
    if require:
        assert result.returncode != 0 and "1 error" in result.stdout, result.stdout[-2000:]
    else:
        assert result.returncode == 0 and "1 skipped" in result.stdout, result.stdout[-2000:]

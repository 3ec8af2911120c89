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


@pytest.mark.parametrize("require", [False, True], ids=["developer", "ci"])
def test_a_missing_weed_binary_skips_or_fails_naming_it(tmp_path, require):
    env = {**os.environ, "MEDIA_CRAWLER_TEST_WEED": str(tmp_path / "no-weed-here"),
           "MEDIA_CRAWLER_REQUIRE_SERVICES": "1" if require else "0"}
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", ONE_S3_TEST], cwd=REPO,
                            env=env, capture_output=True, text=True, timeout=300)
    assert "SeaweedFS's weed binary is not installed" in result.stdout
    if require:
        assert result.returncode != 0 and "1 error" in result.stdout, result.stdout[-2000:]
    else:
        assert result.returncode == 0 and "1 skipped" in result.stdout, result.stdout[-2000:]

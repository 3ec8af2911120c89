"""The tests' SeaweedFS (media_crawler_sim/seaweedfs.py): absent, a test skips naming it
through services.missing, and under CI's services-required switch fails instead."""
from __future__ import annotations

from media_crawler_sim.seaweedfs import ACCESS_KEY, REGION, SECRET_KEY, S3Server, SeaweedFSMissing
from media_crawler_sim.seaweedfs import start_seaweedfs as _start
from media_crawler_tests.services import missing

__all__ = ["ACCESS_KEY", "REGION", "SECRET_KEY", "S3Server", "start_seaweedfs"]


def start_seaweedfs() -> S3Server:
    try:
        return _start()
    except SeaweedFSMissing as exc:
        missing("SeaweedFS", str(exc))

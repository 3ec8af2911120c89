"""Process tokens tell a dead lease holder from a live one; crash points kill the process at the n-th hit."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from media_crawler.crashpoints import CRASH_ENV, parse_target
from media_crawler.pipeline.liveness import is_dead, lease_owner, process_token, token_of_owner


def test_this_process_is_alive_and_a_finished_one_is_dead():
    assert is_dead(process_token()) is False
    assert is_dead(token_of_owner(lease_owner("run-1"))) is False
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    token = process_token(child.pid)
    child.wait()
    assert is_dead(token) is True


def test_a_recycled_pid_reads_as_dead_and_other_hosts_as_unknown():
    host, pid, start = process_token().split("/")
    assert is_dead(f"{host}/{pid}/{int(start) + 1}") is True, "same pid, another start time: another process"
    assert is_dead(f"elsewhere/{pid}/{start}") is None
    assert is_dead("not-a-token") is None and is_dead(None) is None


def test_parse_target():
    assert parse_target("after_part_write") == ("after_part_write", 1)
    assert parse_target("mid_ledger_batch:3") == ("mid_ledger_batch", 3)
    assert parse_target("") is None
    with pytest.raises(ValueError):
        parse_target("after_lunch")


@pytest.mark.parametrize("nth, survives", [(3, False), (4, True)])
def test_crash_point_kills_with_sigkill_at_the_nth_hit(nth, survives):
    script = ("from media_crawler.crashpoints import crash_point\n"
              "for _ in range(3): crash_point('after_claim')\n"
              "print('survived')")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, CRASH_ENV: f"after_claim:{nth}"})
    assert (done.returncode == 0 and "survived" in done.stdout) is survives
    if not survives:
        assert done.returncode == -signal.SIGKILL

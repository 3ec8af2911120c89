"""The peer download benchmark (issue 4): bench/run.sh with the shared harness, then bench/RESULTS.md.

    python -m bench peer          (what `make bench` runs; PHASES, TOOLS, REPS, ...: see bench/run.sh)

The harness is a shell script beside the repository (shared/bench/run_bench.sh);
run.sh drives it and the phases of ours (`floor`, `big`, `before`), with the
options as environment variables. This is its entry in `python -m bench`.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

RUN_SH = Path(__file__).with_name("run.sh")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv:  # run.sh takes its options from the environment only
        print(__doc__ + "\n" + "".join(line[2:] + "\n" for line in RUN_SH.read_text().splitlines()[1:21]))
        return 0 if argv[0] in ("-h", "--help") else 2
    return subprocess.run(["bash", str(RUN_SH)], check=False).returncode


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# The peer download benchmark (issue 4), with this project as one more tool, then
# bench/RESULTS.md. `make bench` runs this. All traffic stays on 127.0.0.1.
#
#   bash bench/run.sh                                  everything (~15 min on 2 cores)
#   PHASES="clean small" TOOLS=req_pool8,aria2c,curl,project REPS=1 bash bench/run.sh
#
# PHASES: run_bench.sh's phases (phys clean small fault fault2) plus two of ours:
# `big`, which run_bench.sh prepares (the 472 MB single file) but does not run: here it
# measures peak RSS while the project downloads that file (BIG_TOOLS, BIG_REPS: its
# tools, reps); and `floor`: `python -m bench floor`, only what the project's guarantees
# cost (stream, sha256, fsync, full image decode, link into sha256/ab/cd/, one batched
# ledger row per item; 2 processes), in the project's place, against curl and req_pool8
# on the main and small sets (FLOOR_REPS): what any tool keeping those guarantees takes on this machine.
# `before`: with BEFORE_REV set (a git revision), that revision runs as the project on the
# main and small sets beside curl and req_pool8 (BEFORE_REPS), from a worktree of it with
# this venv: what a change cost, as ratios to the same peers in the same run (BEFORE_ALLOW:
# its --allow-host argument, default 127.0.0.1, the spelling revisions before the URL policy took).
# Other variables (REPS, SMALL_REPS, FAULT_REPS, TOOLS, FTOOLS, SKIP_SETUP, BENCH_WORK)
# go to run_bench.sh unchanged.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(dirname "$HERE")"
# The shared folder is a sibling of the repository checkout (CI clones elsewhere, with shared/ beside it).
SHARED="${BENCH_SHARED:-$(dirname "$REPO")/shared/bench}"
[ -f "$SHARED/run_bench.sh" ] || { echo "bench: $SHARED/run_bench.sh not found (shared/ must sit beside the repo)" >&2; exit 2; }
[ -x "$REPO/.venv/bin/media-crawler" ] || { echo "bench: $REPO/.venv/bin/media-crawler missing: run 'make install' first" >&2; exit 2; }

export BENCH_WORK="${BENCH_WORK:-/tmp/media-bench}"
# bench.py substitutes {feed} (the set's feed URL) and {out} (a fresh empty folder per run)
# and checks the files under {out} by content. The feed's origin on 127.0.0.1 must be
# allowed explicitly (`--allow-host URL` lists that URL's host and port): the crawler
# refuses internal hosts, and other ports of a listed one, otherwise.
if [ -z "${BENCH_PROJECT_CMD:-}" ]; then
  BENCH_PROJECT_CMD="$REPO/.venv/bin/media-crawler fetch-urls --feed {feed} --store {out} --allow-host {feed} --workers 8"
fi
export BENCH_PROJECT_CMD
export PHASES="${PHASES:-phys clean small fault fault2 big floor}"
BIG_TOOLS="${BIG_TOOLS:-req_pool8,aria2c,curl,project}"
BIG_REPS="${BIG_REPS:-3}"

# physlimits.py measures the server with ab (apache2-utils), which run_bench.sh's setup does not install.
if [[ " $PHASES " == *" phys "* ]] && ! command -v ab >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq apache2-utils; } >/dev/null 2>&1 || true
  fi
  command -v ab >/dev/null || { echo "bench: 'ab' (apache2-utils) missing: skipping the phys phase" >&2; PHASES="${PHASES//phys/}"; }
fi

# Bytecode as an installed package has it: with PYTHONDONTWRITEBYTECODE set (as on these machines) a
# checkout whose sources changed since `make install` would compile them again in every timed run.
"$REPO/.venv/bin/python" -m compileall -q "$REPO/media_crawler" "$REPO/media_crawler_sim"

mkdir -p "$BENCH_WORK"
LOG="$BENCH_WORK/bench_run.log"
started_load="$(cut -d' ' -f1-3 /proc/loadavg)"
bash "$SHARED/run_bench.sh" 2>&1 | tee "$LOG"
RESULTS="$(sed -n 's/^== results in \(.*\) ==$/\1/p' "$LOG" | tail -1)"
[ -d "$RESULTS" ] || { echo "bench: could not find the results folder in $LOG" >&2; exit 1; }

if [[ " $PHASES " == *" big "* ]]; then
  "$BENCH_WORK/venv/bin/python" "$SHARED/bench.py" run --set big --reps "$BIG_REPS" --tools "$BIG_TOOLS" \
    --tag clean --out "$RESULTS/clean_big.jsonl"
fi

if [[ " $PHASES " == *" floor "* ]]; then
  for set_name in main small; do
    BENCH_PROJECT_CMD="cd $REPO && $REPO/.venv/bin/python -m bench floor --feed {feed} --store {out}" \
      "$BENCH_WORK/venv/bin/python" "$SHARED/bench.py" run --set "$set_name" --reps "${FLOOR_REPS:-3}" \
      --tools curl,req_pool8,project --tag floor --out "$RESULTS/floor_$set_name.jsonl"
  done
fi

if [ -n "${BEFORE_REV:-}" ]; then
  BEFORE_DIR="$BENCH_WORK/before-$(git -C "$REPO" rev-parse --short "$BEFORE_REV")"
  [ -d "$BEFORE_DIR" ] || git -C "$REPO" worktree add --detach "$BEFORE_DIR" "$BEFORE_REV" >/dev/null
  "$REPO/.venv/bin/python" -m compileall -q "$BEFORE_DIR/media_crawler"
  for set_name in main small; do
    reps="${BEFORE_REPS:-3}"; [ "$set_name" = small ] && reps="${BEFORE_SMALL_REPS:-2}"
    # cd first: `python -m` puts the working folder ahead of PYTHONPATH on sys.path.
    BENCH_PROJECT_CMD="cd $BEFORE_DIR && env PYTHONPATH=$BEFORE_DIR $REPO/.venv/bin/python -m media_crawler.cli fetch-urls --feed {feed} --store {out} --allow-host ${BEFORE_ALLOW:-127.0.0.1} --workers 8" \
      "$BENCH_WORK/venv/bin/python" "$SHARED/bench.py" run --set "$set_name" --reps "$reps" \
      --tools curl,req_pool8,project --tag before --out "$RESULTS/before_$set_name.jsonl"
  done
fi

{
  echo "{"
  echo "  \"date\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\","
  echo "  \"nproc\": $(nproc),"
  echo "  \"mem_total_kb\": $(awk '/^MemTotal/ {print $2}' /proc/meminfo),"
  echo "  \"kernel\": \"$(uname -r)\","
  echo "  \"python\": \"$("$REPO/.venv/bin/python" -c 'import platform; print(platform.python_version())')\","
  echo "  \"cpu\": \"$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo | tr -d '"')\","
  echo "  \"loadavg_before\": \"$started_load\","
  echo "  \"loadavg_after\": \"$(cut -d' ' -f1-3 /proc/loadavg)\","
  echo "  \"project_cmd\": \"$BENCH_PROJECT_CMD\","
  echo "  \"phases\": \"$PHASES\","
  echo "  \"before_rev\": \"${BEFORE_REV:-}\""
  echo "}"
} > "$RESULTS/machine.json"

(cd "$REPO" && .venv/bin/python -m bench report "$RESULTS") > "$HERE/RESULTS.md"
echo "bench: wrote $HERE/RESULTS.md from $RESULTS"

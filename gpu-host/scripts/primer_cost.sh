#!/usr/bin/env bash
# Where a first trace's time goes when the PC sampling before it runs: one eager job, two `trace --pid` of 0.5 s
# with the tool's log (RUST_LOG=info) and the injection library's (GPU_TOOLS_TRACE_LOG=debug, in the job's stderr),
# both on CLOCK_MONOTONIC: each tool line stamped with the time since its command began, each library line placed
# on the same scale. A third trace with --no-pc-primer into a second fresh job gives the unprimed first trace's time.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); gt=$root/.gpu/bin/bin-gpu-tools; py=${PYTHON:-python3}
out=${OUT:-/tmp/primer_cost}; mkdir -p "$out"
export STOP_FILE=$out/stop; rm -f "$STOP_FILE"
. "$root/gpu-host/support/job_ready.sh"
# The jobs start in this shell (not in a command substitution), so that `wait` waits for them.
start_job() { $py "$root/gpu-host/python/survival_job.py" eager --seconds 120 > "$1" 2>&1 & }
stamp() { # T0: lines stamped with ms since T0 (CLOCK_MONOTONIC seconds)
  $py -u -c 'import sys, time
t0 = float(sys.argv[1])
for line in sys.stdin:
    print(f"{(time.monotonic() - t0) * 1e3:8.1f} ms  {line}", end="", flush=True)' "$1"; }
now() { $py -c 'import time; print(f"{time.monotonic():.6f}")'; }
traced() { # NAME PID [ARGS]: one 0.5 s trace, its command's start on the monotonic clock in NAME.t0
  local name=$1 pid=$2; shift 2
  local t0; t0=$(now); echo "$t0" > "$out/$name.t0"
  { GPU_TOOLS_TRACE_LOG=debug RUST_LOG=${LOG:-info} "$gt" trace --pid "$pid" --duration 0.5 -q \
      -o "$out/$name.gputrace" "$@" 2>&1; echo "exit $?"; } | stamp "$t0" > "$out/$name.txt"
}
library_lines() { # NAME JOB_LOG: the library's lines from NAME's start to the next command's, on its scale
  $py - "$(cat "$out/$1.t0")" "$2" "${3:-inf}" <<'PY'
import re, sys
t0, log, end = float(sys.argv[1]), sys.argv[2], float(sys.argv[3])
for line in open(log, errors="replace"):
    m = re.match(r"gpu-tools-inject\[\d+\] (\d+\.\d+) (\w+) (.*)", line)
    if m and t0 <= float(m.group(1)) < end:
        print(f"{(float(m.group(1)) - t0) * 1e3:8.1f} ms  lib {m.group(2)} {m.group(3)[:200]}")
PY
}
start_job "$out/job.log"; pid=$(job_ready "$out/job.log" 60); sleep 2
traced first "$pid"; traced second "$pid"
touch "$STOP_FILE"; wait
rm -f "$STOP_FILE"
start_job "$out/job2.log"; pid2=$(job_ready "$out/job2.log" 60); sleep 2
traced unprimed "$pid2" --no-pc-primer
touch "$STOP_FILE"; wait
echo "job: $(grep '^result' "$out/job.log"); job 2: $(grep '^result' "$out/job2.log")"
for name in first second unprimed; do echo "--- $name: $(tail -1 "$out/$name.txt")"; done
echo "--- first trace, the tool's lines and the library's, by time"
{ grep -v '^ *[0-9.]* ms  *[0-9]' "$out/first.txt" | cut -c1-220; library_lines first "$out/job.log" "$(cat "$out/second.t0")"; } | sort -n | head -120
echo "--- the unprimed first trace"
{ grep -v '^ *[0-9.]* ms  *[0-9]' "$out/unprimed.txt" | cut -c1-220; library_lines unprimed "$out/job2.log"; } | sort -n | head -60

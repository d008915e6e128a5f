#!/usr/bin/env bash
# Does a `where` answered by the flight recorder leave a job's CUDA graph captures alone? In the thirty-ninth session
# (an H100, driver 580) a `where` of the survival matrix's capture-late row asked the driver about the stream a
# `torch.cuda.graph` capture was running on (`cuStreamQuery`, CUresult 900): the capture ended with
# `cudaErrorStreamCaptureInvalidated` and the job with exit 1. Main a22da0c asks nothing during a capture.
#   C: capture-late with CAPTURE_EVERY=2 (a new graph every other step: most of the job's time is capturing), traced
#      once for 1 s (which leaves the flight recorder in it), then WHERES (default 300) `where --pid` one after
#      another; then an untouched run of the same steps, whose result must be the same.
#   O: the same with GT_OLD (a build from before a22da0c), when set: the job is expected to die.
# Each prints how many `where`s found a capture under way (a stream "not asked") and how many got CUresult 900.
#
# Stage first, then: bash gpu-host/scripts/where_capture_probe.sh     (OUT: logs, default /tmp/where_capture_probe)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); gt=$root/.gpu/bin/bin-gpu-tools; py=${PYTHON:-python3}
job=$root/gpu-host/python/survival_job.py
out=${OUT:-/tmp/where_capture_probe}; mkdir -p "$out"
every=${CAPTURE_EVERY:-2}
unset GPU_TOOLS_INJECT_LIB
. "$root/gpu-host/support/job_ready.sh"
run() { # LABEL GT
  local l=$1 g=$2 pid rc steps
  rm -f "$out/$l.stop"
  CAPTURE_EVERY=$every STOP_FILE=$out/$l.stop $py "$job" capture-late --seconds 300 > "$out/$l.log" 2>&1 &
  local bg=$!
  pid=$(job_ready "$out/$l.log" 120) || { echo "$l did not start: $(tail -3 "$out/$l.log")"; kill "$bg"; return; }
  timeout 60 "$g" trace --pid "$pid" --duration 1 -q -o "$out/$l.gputrace" > "$out/$l-trace.txt" 2>&1
  echo "$l trace: rc=$? $(grep -o 'a flight recorder runs in the process' "$out/$l-trace.txt" | head -1)"
  rm -f "$out/$l.gputrace"
  local asked=0 capturing=0 unsupported=0 failed=0
  for _ in $(seq "${WHERES:-300}"); do
    kill -0 "$pid" 2>/dev/null || break
    timeout 20 "$g" where --pid "$pid" > "$out/$l-where.txt" 2>&1 || failed=$((failed + 1))
    asked=$((asked + 1))
    if grep -q 'not asked: .*capturing a CUDA graph' "$out/$l-where.txt"; then
      capturing=$((capturing + 1)); cp "$out/$l-where.txt" "$out/$l-where-capturing.txt"
    fi
    if grep -q 'CUresult 900' "$out/$l-where.txt"; then
      unsupported=$((unsupported + 1)); cp "$out/$l-where.txt" "$out/$l-where-900.txt"
    fi
  done
  touch "$out/$l.stop"; wait "$bg"; rc=$?
  echo "$l: $asked wheres, $capturing found a capture under way, $unsupported got CUresult 900, $failed failed;" \
    "job exit $rc: $(grep -m1 '^result' "$out/$l.log" || tail -c 400 "$out/$l.log")"
  steps=$(grep -m1 '^result' "$out/$l.log" | grep -o 'steps [0-9]*' | cut -d' ' -f2)
  if [ -n "$steps" ]; then
    CAPTURE_EVERY=$every $py "$job" capture-late --steps "$steps" > "$out/$l-untouched.log" 2>&1
    echo "$l untouched: $(grep -m1 '^result' "$out/$l-untouched.log" || tail -c 300 "$out/$l-untouched.log")"
  fi
}
run C "$gt"
[ -n "${GT_OLD:-}" ] && run O "$GT_OLD"
exit 0

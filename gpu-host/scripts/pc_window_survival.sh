#!/usr/bin/env bash
# Does a job live through a PC sampling window that follows a trace, and what do the windows hold? A C job
# (`pc_graph_probe serve`: a 200 us kernel launched without pause, a synchronize every 50) under a native backtrace
# handler (gpu-host/support/segv_backtrace.c); `trace --pid` for 2 s with TRACE_ARGS, then `profile --pid
# --pc-sampling` for 2 s; the job's exit status, the window's counts and any fatal signal's stack. Then in-process
# variants of the probe: whether PC sampling enabled and disabled before a trace keeps later sampling whole.
# Run from the checkout that goes with .gpu/ (STAGE_ONLY=gpu-tools scripts/gpu-stage):
#   OUT_DIR=/tmp/pcw bash gpu-host/scripts/pc_window_survival.sh
# Results: docs/attach-sessions.md (eleventh session) and docs/driver-notes.md.
set -u
cd "$(dirname "$0")/../.."
gt=$PWD/.gpu/bin/bin-gpu-tools; o=${OUT_DIR:-/tmp/pc_window_survival}; mkdir -p "$o"
cuda=/usr/local/cuda
inc=$(dirname "$(find $cuda/ -name cupti.h | head -1)"); lib=$(dirname "$(find $cuda/ -name 'libcupti.so*' | head -1)")
nvcc -O2 -std=c++17 -arch=sm_90 -I"$inc" -o "$o/probe" gpu-host/scripts/pc_graph_probe.cu -L"$lib" -lcupti -lcuda \
  -lpthread -ldl -Xlinker -rpath="$lib" > "$o/nvcc.txt" 2>&1 || { echo "nvcc failed"; head -20 "$o/nvcc.txt"; exit 1; }
probe=$o/probe
gcc -shared -fPIC -O1 -o "$o/segv.so" gpu-host/support/segv_backtrace.c || exit 1
ms() { date +%s%3N; }
run() { # NAME LAUNCHES TRACE_ARGS|- KILL(0/1)
  local n=$1 d=$o/$1 pid= t0; mkdir -p "$d"
  LD_PRELOAD=$o/segv.so "$probe" serve "$2" 200 > "$d/job.log" 2>&1 &
  local j=$!
  for _ in $(seq 300); do pid=$(grep -m1 -o '^ready [0-9]*' "$d/job.log" | cut -d' ' -f2); [ -n "$pid" ] && break; sleep 0.1; done
  t0=$(ms)
  if [ "$3" != - ]; then
    # shellcheck disable=SC2086
    timeout 60 "$gt" trace --pid "$pid" --duration 2 -q $3 -o "$d/t.gputrace" > "$d/t.txt" 2>&1
    echo "$n trace rc=$? at $(( $(ms) - t0 )) ms"
  fi
  timeout 60 "$gt" profile --pid "$pid" --duration 2 --pc-sampling > "$d/pc.txt" 2>&1
  echo "$n pc rc=$? at $(( $(ms) - t0 )) ms: $(grep -o 'counted [0-9]* samples in [0-9]* PC' "$d/pc.txt" | head -1)"
  [ "$4" = 1 ] && kill "$j" 2>/dev/null
  wait "$j"; echo "$n job rc=$? at $(( $(ms) - t0 )) ms"
  grep -E "segv_backtrace: signal|^result" "$d/job.log" | head -3 | cut -c1-200
}
# PC sampling with no recorder, then a trace (which then starts none: the stream says why), then PC sampling (which
# starts one inside its finish).
pc_then_trace() {
  local n=pc-norec-trace-pc d=$o/pc-norec-trace-pc pid=; mkdir -p "$d"
  LD_PRELOAD=$o/segv.so "$probe" serve 60000 200 > "$d/job.log" 2>&1 &
  local j=$!
  for _ in $(seq 300); do pid=$(grep -m1 -o '^ready [0-9]*' "$d/job.log" | cut -d' ' -f2); [ -n "$pid" ] && break; sleep 0.1; done
  timeout 60 "$gt" profile --pid "$pid" --duration 1 --pc-sampling --no-flight-recorder > "$d/pc1.txt" 2>&1
  echo "$n pc1 rc=$? $(grep -o 'counted [0-9]* samples in [0-9]* PC' "$d/pc1.txt" | head -1)"
  timeout 60 "$gt" trace --pid "$pid" --duration 1 -q -o "$d/t.gputrace" > "$d/t.txt" 2>&1
  echo "$n trace rc=$? $(grep -o '[0-9]* kernels' "$d/t.txt" | head -1); $(grep -c 'no flight recorder: PC sampling has run' "$d/t.txt") no-recorder notes"
  timeout 60 "$gt" profile --pid "$pid" --duration 1 --pc-sampling > "$d/pc2.txt" 2>&1
  echo "$n pc2 rc=$? $(grep -o 'counted [0-9]* samples in [0-9]* PC' "$d/pc2.txt" | head -1); $(grep -c 'flight recorder runs' "$d/pc2.txt") recorder notes"
  wait "$j"; echo "$n job rc=$?"
  grep -E "segv_backtrace: signal|^result" "$d/job.log" | head -3 | cut -c1-200
}
pc_then_trace
for i in 1 2 3; do run "kernel-norec-$i" 45000 "--kinds kernel --no-flight-recorder" 0; done
run kernel-norec-kill 60000 "--kinds kernel --no-flight-recorder" 1
run defaults 45000 "" 0
run pc-first 45000 - 0
for v in concurrent-first prime-pc-concurrent-first concurrent-kernel-first prime-pc-concurrent-kernel-first; do
  timeout 60 "$probe" "$v" 200 200 > "$o/$v.txt" 2>&1; echo "$v rc=$? $(grep ^result "$o/$v.txt")"
done
export PROBE_INJECT=$PWD/.gpu/bin/libgpu_tools_inject.so
for v in inject-first prime-pc-inject-first inject-concurrent-first prime-pc-inject-concurrent-first; do
  timeout 60 "$probe" "$v" 200 200 > "$o/$v.txt" 2>&1; echo "$v rc=$? $(grep ^result "$o/$v.txt")"
done

#!/usr/bin/env bash
# Follow-up questions of the attach survival matrix, one section each (all output in $OUT/followups.txt):
#   after-profile   one job per sequence of attaches (eager and torch.compile default): does a trace window after
#                   `profile --pid` (metrics, PC sampling) or after `trace --counters` still hold kernels?
#   where           does `where` attach to a C program after each CUPTI step (where_after_cupti_probe.cu), and
#                   after a `trace --pid` of it?
#   exit-in-window  a job that exits inside a trace window: does the stream end with its end record?
#   jax-repeat      is the JAX job's result the same in two untouched runs of the same steps?
#   reenable        does CUPTI deliver a kernel record per launch when kernel records go on and off again and again
#                   (reenable_probe.cu, both orders of ending a window)?
#   coverage        KINDS jobs (survival_job.py's, or probe: where_after_cupti_probe.cu), ATTACHES (default 6)
#                   1 s traces (with TRACE_ARGS) each: launches without a GPU record, per tenth of
#                   each window (trace_launch_coverage.py)
#
#   bash gpu-host/scripts/attach_followups.sh [SECTION...]      (after staging .gpu/, as attach_matrix.sh)
# Settings: OUT (default /tmp/attach_followups), KINDS and SEQUENCES (after-profile's jobs and attach sequences,
# sequences separated by commas), DEBUG=1 (the injected library's debug log in each job's log, printed after the
# job), KEEP=1 (keeps each window's trace as $OUT/keep/KIND-SEQUENCE-N.gputrace).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); gt=$root/.gpu/bin/bin-gpu-tools; py=${PYTHON:-python3}
job=$root/gpu-host/python/survival_job.py
out=${OUT:-/tmp/attach_followups}; mkdir -p "$out"
cupti=${CUPTI:-/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13}
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$out/inductor-cache}
sections=${*:-where jax-repeat exit-in-window after-profile}

# start LOG CMD...: starts CMD in the background with output to LOG; prints the pid of its `ready PID` line.
start() {
  local log=$1; shift
  "$@" > "$log" 2>&1 &
  local bg=$!
  for _ in $(seq 3000); do
    local line; line=$(grep -m1 -o '^ready [0-9]*' "$log" 2>/dev/null)
    [ -n "$line" ] && { echo "${line#ready }"; return 0; }
    kill -0 $bg 2>/dev/null || { echo "job ended before ready: $(tail -c 400 "$log")" >&2; return 1; }
    sleep 0.1
  done
  return 1
}
[ -n "${DEBUG:-}" ] && export GPU_TOOLS_TRACE_LOG=debug
mkdir -p "$out/keep"
# attach TOOL PID [NAME]: one 1 s window of TOOL; prints its output's summary and notices (KEEP=1 keeps the trace
# as keep/NAME.gputrace).
attach() {
  local tool=$1 pid=$2 name=${3:-} f=$out/attach.txt rc
  case $tool in
  trace) timeout 120 "$gt" trace --pid "$pid" --duration 1 -o "$out/w.gputrace" > "$f" 2>&1 ;;
  counters) timeout 120 "$gt" trace --pid "$pid" --duration 1 --counters -o "$out/w.gputrace" > "$f" 2>&1 ;;
  metrics) timeout 120 "$gt" profile --pid "$pid" --duration 1 > "$f" 2>&1 ;;
  pc) timeout 120 "$gt" profile --pid "$pid" --duration 1 --pc-sampling > "$f" 2>&1 ;;
  where) timeout 120 "$gt" where --yes "$pid" > "$f" 2>&1 ;;
  esac
  rc=$?
  echo "-- $tool rc=$rc"
  grep -iE 'kernels|record|notice|warn|error|refus|graph|lost|left out|window|ended|profiler|thread' "$f" | head -25
  if [ -n "${KEEP:-}" ] && [ -n "$name" ] && [ -f "$out/w.gputrace" ]; then mv "$out/w.gputrace" "$out/keep/$name.gputrace"
  else rm -f "$out/w.gputrace"; fi
}

for section in $sections; do
  echo "=== $section ($(date +%T))"
  case $section in
  where)
    nvcc -O2 -o "$out/where_probe" "$root/gpu-host/scripts/where_after_cupti_probe.cu" -ldl || continue
    for v in none dlopen subscribe activity activity-finalize subscribe-finalize; do
      pid=$(start "$out/probe.log" "$out/where_probe" "$v" 6 "$cupti") || continue
      echo "## variant $v"; grep '^cupti' "$out/probe.log"
      attach where "$pid"
      wait; tail -1 "$out/probe.log"
    done
    echo "## a trace --pid, then where"
    pid=$(start "$out/probe.log" "$out/where_probe" none 10 "$cupti") && {
      attach trace "$pid"; attach where "$pid"; wait; tail -1 "$out/probe.log"; }
    ;;
  reenable)
    nvcc -O2 -o "$out/reenable_probe" "$root/gpu-host/scripts/reenable_probe.cu" -ldl || continue
    for order in ${ORDERS:-disable-flush flush-disable-flush clock-switch clock-once}; do timeout 60 "$out/reenable_probe" $order 8 "$cupti"; done ;;
  coverage)
    for kind in ${KINDS:-eager compile}; do
      echo "## $kind ${TRACE_ARGS:-}"
      if [ "$kind" = probe ]; then
        [ -x "$out/where_probe" ] || nvcc -O2 -o "$out/where_probe" "$root/gpu-host/scripts/where_after_cupti_probe.cu" -ldl
        pid=$(start "$out/job.log" "$out/where_probe" none 20 "$cupti") || continue
      else pid=$(start "$out/job.log" $py "$job" $kind --seconds 30) || continue; fi
      for n in $(seq "${ATTACHES:-6}"); do
        timeout 120 "$gt" trace --pid "$pid" --duration 1 ${TRACE_ARGS:-} -q -o "$out/w.gputrace" > "$out/attach.txt" 2>&1
        echo "-- trace $n rc=$?: $(grep -m1 'summary' "$out/attach.txt")"
        "$gt" export "$out/w.gputrace" --chrome "$out/w.json" > /dev/null 2>&1 \
          && $py "$root/gpu-host/python/trace_launch_coverage.py" "$out/w.json" | tail -5
        if [ -n "${KEEP:-}" ]; then mv "$out/w.gputrace" "$out/keep/coverage-$kind-$n${TRACE_ARGS:+-v}.gputrace"; fi
        rm -f "$out/w.gputrace" "$out/w.json"; sleep 0.3
      done
      while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
      grep '^result' "$out/job.log"
      [ -n "${DEBUG:-}" ] && grep 'gpu-tools-inject' "$out/job.log" | grep -E 'WARN|ERROR|did not lend|dropped' | cut -c1-300 | head -20
    done ;;
  jax-repeat)
    for i in 1 2 3; do $py "$job" jax --steps 20000 2>&1 | grep '^result'; done ;;
  exit-in-window)
    for kind in probe eager; do
      echo "## $kind exits 2 s into a 6 s window"
      if [ $kind = probe ]; then pid=$(start "$out/job.log" "$out/where_probe" none 3 "$cupti")
      else pid=$(start "$out/job.log" $py "$job" eager --seconds 3); fi || continue
      GPU_TOOLS_TRACE_LOG=debug timeout 60 "$gt" trace --pid "$pid" --duration 6 -o "$out/w.gputrace" > "$out/attach.txt" 2>&1
      echo "trace rc=$?"; tail -15 "$out/attach.txt"; wait
      echo "job log:"; grep -v '^progress' "$out/job.log" | tail -25; rm -f "$out/w.gputrace"
    done ;;
  after-profile)
    IFS=, read -r -a sequences <<< "${SEQUENCES:-trace metrics trace trace,trace pc trace trace,trace trace counters trace trace}"
    for kind in ${KINDS:-eager compile}; do
      for sequence in "${sequences[@]}"; do
        echo "## $kind: $sequence"
        pid=$(start "$out/job.log" $py "$job" $kind --seconds 25) || continue
        n=0
        for tool in $sequence; do
          n=$((n + 1)); attach $tool "$pid" "$kind-${sequence// /-}-$n"; sleep 0.3
        done
        while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
        grep '^result' "$out/job.log"
        [ -n "${DEBUG:-}" ] && grep 'gpu-tools-inject' "$out/job.log" | grep -v 'comes to the trace' | cut -c1-400
      done
    done ;;
  esac
done 2>&1 | tee "$out/followups.txt"

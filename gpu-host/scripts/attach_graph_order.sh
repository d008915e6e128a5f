#!/usr/bin/env bash
# Which attaching command loses CUDA graph launches? One CuPy graph job per command (its result counts every
# launch exactly), each attached ATTACHES times with that command alone, then compared with an untouched run of
# the same steps: `lost` is the number of launches whose effect is missing. Stage first; run from the checkout.
#   bash gpu-host/scripts/attach_graph_order.sh [TOOL...]   (trace trace-node counters metrics pc-sampling where)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); gt=$root/.gpu/bin/bin-gpu-tools; py=${PYTHON:-python3}
job=$root/gpu-host/python/survival_job.py; out=${OUT:-/tmp/graph_order}; mkdir -p "$out"
attaches=${ATTACHES:-3}; seconds=${JOB_SECONDS:-20}
unset GPU_TOOLS_INJECT_LIB
one() {
  local tool=$1 d=$out/$1 pid n
  mkdir -p "$d"
  $py "$job" cupy-graph --seconds "$seconds" > "$d/attached.log" 2>&1 & local j=$!
  for _ in $(seq 600); do pid=$(grep -m1 -o '^ready [0-9]*' "$d/attached.log" | cut -d' ' -f2); [ -n "$pid" ] && break; sleep 0.1; done
  sleep 1
  for n in $(seq "$attaches"); do
    case $tool in
    trace) flock "$out/lock" "$gt" trace --pid "$pid" --duration 1 -q > "$d/a$n.txt" 2>&1 ;;
    trace-node) flock "$out/lock" "$gt" trace --pid "$pid" --duration 1 -q --cuda-graph-trace node > "$d/a$n.txt" 2>&1 ;;
    counters) flock "$out/lock" "$gt" trace --pid "$pid" --duration 1 -q --counters > "$d/a$n.txt" 2>&1 ;;
    metrics) flock "$out/lock" "$gt" profile --pid "$pid" --duration 1 > "$d/a$n.txt" 2>&1 ;;
    pc-sampling) flock "$out/lock" "$gt" profile --pid "$pid" --duration 1 --pc-sampling > "$d/a$n.txt" 2>&1 ;;
    where) "$gt" where --yes "$pid" > "$d/a$n.txt" 2>&1 ;;
    esac
    echo "$tool attach $n rc=$?" >> "$d/rc.txt"
    sleep 1
  done
  wait $j
  local steps; steps=$(grep -o 'steps [0-9]*' "$d/attached.log" | cut -d' ' -f2)
  $py "$job" cupy-graph --steps "$steps" > "$d/untouched.log" 2>&1
  local a u; a=$(awk '/^result/ {print $2}' "$d/attached.log"); u=$(awk '/^result/ {print $2}' "$d/untouched.log")
  echo "$tool: $(tr '\n' ' ' < "$d/rc.txt")| steps $steps attached $a untouched $u lost $(awk -v a="$a" -v u="$u" -v s="$steps" 'BEGIN { printf "%.2f", (u - a) / (u / (s + 1)) }') launches"
}
for t in ${*:-trace trace-node counters metrics pc-sampling where}; do one "$t" > "$out/$t.res" 2>&1 & done
wait
cat "$out"/*.res

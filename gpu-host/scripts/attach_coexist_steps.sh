#!/usr/bin/env bash
# A job whose torch.profiler session is open for its whole life, attached to by each command in turn with a plain
# trace between them: which command leaves CUPTI's activity records broken for the job's own profiler and the next
# trace? Prints each step's exit code, the trace's summary line and the stream's notes, then the job's own kernel
# count against an untouched run's. Stage first; run from the checkout:
#   bash gpu-host/scripts/attach_coexist_steps.sh [STEP...]   (default: trace pc-sampling trace where trace metrics trace)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); gt=$root/.gpu/bin/bin-gpu-tools; py=${PYTHON:-python3}
job=$root/gpu-host/python/survival_job.py; out=${OUT:-/tmp/coexist_steps}; mkdir -p "$out"
unset GPU_TOOLS_INJECT_LIB
$py "$job" profiler-open --seconds "${JOB_SECONDS:-40}" > "$out/job.log" 2>&1 & j=$!
for _ in $(seq 600); do pid=$(grep -m1 -o '^ready [0-9]*' "$out/job.log" | cut -d' ' -f2); [ -n "$pid" ] && break; sleep 0.1; done
sleep 1
n=0
for step in ${*:-trace pc-sampling trace where trace metrics trace}; do
  n=$((n + 1)); f=$out/$n-$step.txt
  case $step in
  trace) "$gt" trace --pid "$pid" --duration 1 -q > "$f" 2>&1 ;;
  pc-sampling) "$gt" profile --pid "$pid" --duration 1 --pc-sampling > "$f" 2>&1 ;;
  metrics) "$gt" profile --pid "$pid" --duration 2 > "$f" 2>&1 ;;
  where) "$gt" where --yes "$pid" > "$f" 2>&1 ;;
  esac
  echo "step $n $step rc=$?"
  grep -a -E -- '^--- summary|\(note\)|\(warning\)|\(error\)|no record|refused|gpu-tools (profile|where):' "$f" | cut -c1-260 | head -12
  sleep 1
done
wait $j; echo "job rc=$?"
steps=$(grep -o 'steps [0-9]*' "$out/job.log" | head -1 | cut -d' ' -f2)
$py "$job" profiler-open --steps "$steps" > "$out/untouched.log" 2>&1
echo "attached: $(grep -E '^(torch_profiler|result)' "$out/job.log" | tr '\n' ' ')"
echo "untouched: $(grep -E '^(torch_profiler|result)' "$out/untouched.log" | tr '\n' ' ')"

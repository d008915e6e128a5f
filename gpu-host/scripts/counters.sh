#!/usr/bin/env bash
# GPU-host runs of `gpu-tools trace --counters`: device counters (PM sampling) beside the trace. Stage first
# (scripts/gpu-stage; STAGE_ONLY='gpu-tools' is enough), then, in the checkout that goes with .gpu/:
#   bash gpu-host/scripts/counters.sh [train] [attach] [busy] [bad] [devices]   (default: all)
#   train    trace --counters on gpu-host/python/torch_train.py: the summary's counters line, the trace file's
#            size, `gpu-tools stats` (every report; the counters per kernel where the build has them), and the size
#            of a Perfetto export
#   attach   trace --pid --counters --duration 3 on a running PyTorch job (attach_target.py)
#   busy     trace --counters while `gpu-tools top` holds the counters: refused before the program runs (exit 1)
#   bad      an unknown metric, one PM sampling cannot collect, too short an interval
#   devices  on a host with two GPUs or more: CUDA_VISIBLE_DEVICES=1 gives the program's GPU 0, sampled as GPU 0
# Logs and traces go to $OUT (or /tmp/counters).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); bin=$root/.gpu/bin; py=${PYTHON:-python3}
out=${OUT:-/tmp/counters}; mkdir -p "$out"
gt=$bin/bin-gpu-tools
[ -x "$gt" ] || { echo "missing $gt (stage the workspace)"; exit 1; }
# The embedded injection library is the one under test (not a staged copy from another build).
unset GPU_TOOLS_INJECT_LIB
parts=${*:-train attach busy bad devices}
STEPS=${STEPS:-200}
section() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)"; }

# wait_ready LOG: waits for the target's "ready PID" line and prints the PID.
wait_ready() {
  local line
  for _ in $(seq 600); do
    line=$(grep -m1 '^ready [0-9]*' "$1" 2>/dev/null)
    [ -n "$line" ] && { echo "${line#ready }"; return 0; }
    sleep 0.1
  done
  echo "no ready line in $1" >&2; cat "$1" >&2; return 1
}

if [[ " $parts " == *" train "* ]]; then
  section "torch_train.py --steps $STEPS under trace --counters"
  file=$out/train.gputrace
  timeout 600 "$gt" trace -q --counters -o "$file" -- $py "$root/gpu-host/python/torch_train.py" --steps "$STEPS" \
    > "$out/train.txt" 2> "$out/train.err"
  echo "rc=$?"
  grep -E '^(torch_train|--- summary|counters:)' "$out/train.txt"; head -c 2000 "$out/train.err"
  ls -l "$file"
  section "gpu-tools stats"
  "$gt" stats "$file"; echo "stats rc=$?"
  section "gpu-tools stats --format json --report cuda_gpu_kern_counters_sum (where this build has it)"
  "$gt" stats --format json --report cuda_gpu_kern_counters_sum "$file" | head -c 4000; echo
  section "Perfetto export"
  "$gt" export --perfetto "$out/train.pftrace" "$file"; echo "export rc=$?"
  ls -l "$out/train.pftrace"
  section "the same run, trace without counters, for the size"
  timeout 600 "$gt" trace -q -o "$out/train-plain.gputrace" -- $py "$root/gpu-host/python/torch_train.py" \
    --steps "$STEPS" > /dev/null 2>&1
  ls -l "$out/train-plain.gputrace"
fi

if [[ " $parts " == *" attach "* ]]; then
  section "trace --pid --counters --duration 3 on a running PyTorch job"
  $py "$root/gpu-host/python/attach_target.py" --steps 6000 > "$out/attach-job.log" 2>&1 &
  job=$!
  pid=$(wait_ready "$out/attach-job.log")
  sleep 1
  timeout 60 "$gt" trace --pid "$pid" --counters --duration 3 -q -o "$out/attach.gputrace" > "$out/attach.txt" \
    2> "$out/attach.err"
  echo "trace rc=$?"
  grep -E '^(--- summary|counters:)' "$out/attach.txt"; head -c 2000 "$out/attach.err"
  wait $job; echo "job rc=$?"
  "$gt" stats --report cuda_gpu_kern_counters_sum "$out/attach.gputrace" | head -30
fi

if [[ " $parts " == *" busy "* ]]; then
  section "trace --counters while gpu-tools top holds the counters (refused, exit 1, the program not run)"
  "$gt" top --duration 15 > /dev/null 2> "$out/busy-top.err" &
  top=$!
  sleep 3
  "$gt" trace -q --counters -- $py -c 'print("the program ran")'; echo "rc=$?"
  wait $top; echo "top rc=$?"
  section "and trace --counters first, then top (top leaves the GPU out, or fails with --device)"
  "$gt" trace -q --counters -- $py "$root/gpu-host/python/bf16_matmul.py" --seconds 8 > "$out/busy-trace.txt" 2>&1 &
  t=$!
  sleep 4
  "$gt" top --duration 1 --device 0; echo "top --device 0 rc=$?"
  wait $t; echo "trace rc=$?"; grep '^counters:' "$out/busy-trace.txt"
fi

if [[ " $parts " == *" bad "* ]]; then
  section "bad input"
  "$gt" trace --counters sm__cycles_activ.avg.pct_of_peak_sustained_elapsed -- true; echo "unknown metric: rc=$?"
  "$gt" trace --counters gpu__time_duration.sum -- true; echo "not collectable by PM sampling: rc=$?"
  "$gt" trace --counters sm__throughput.avg.pct_of_peak_sustained_elapsed -- true; echo "several passes: rc=$?"
  "$gt" trace --counters --counter-interval 50us -- true; echo "interval too short: rc=$?"
  "$gt" trace --counters python3 -c 1; echo "a program as the value: rc=$?"
fi

if [[ " $parts " == *" devices "* ]]; then
  n=$(nvidia-smi -L | wc -l)
  if [ "$n" -ge 2 ]; then
    section "CUDA_VISIBLE_DEVICES=1: the program's GPU 0 is the host's GPU 1; samples say device 0"
    CUDA_VISIBLE_DEVICES=1 timeout 120 "$gt" trace -q --counters -o "$out/devices.gputrace" -- \
      $py "$root/gpu-host/python/bf16_matmul.py" --seconds 3 > "$out/devices.txt" 2>&1
    echo "rc=$?"; grep '^counters:' "$out/devices.txt"
    section "attached: a job on the host's GPU 1, seen as its device 0; gpu-tools sees every GPU"
    CUDA_VISIBLE_DEVICES=1 $py "$root/gpu-host/python/attach_target.py" --steps 6000 > "$out/devices-job.log" 2>&1 &
    job=$!
    pid=$(wait_ready "$out/devices-job.log")
    RUST_LOG=info timeout 60 "$gt" trace --pid "$pid" --counters --duration 2 -q > "$out/devices-attach.txt" \
      2> "$out/devices-attach.err"
    echo "rc=$?"; grep '^counters:' "$out/devices-attach.txt"; grep -o 'counters: sampling device.*' "$out/devices-attach.err"
    wait $job
    section "two bf16 matmuls, one per GPU, under one trace: a counters line per GPU"
    timeout 120 "$gt" trace -q --counters -- bash -c "$py $root/gpu-host/python/bf16_matmul.py --seconds 4 --device 0 & \
      $py $root/gpu-host/python/bf16_matmul.py --seconds 4 --device 1; wait" > "$out/devices-two.txt" 2>&1
    echo "rc=$?"; grep '^counters:' "$out/devices-two.txt"
  else
    section "devices: one GPU here, skipped"
  fi
fi

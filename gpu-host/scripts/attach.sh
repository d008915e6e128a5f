#!/usr/bin/env bash
# GPU-host runs of `gpu-tools trace --pid`: every target is started by plain python3 or its own binary, with no
# gpu-tools variable. Stage first (scripts/gpu-stage), then, in the checkout that goes with .gpu/:
#   bash gpu-host/scripts/attach.sh [torch] [c] [jax] [coexist] [bad] [ctrlc] [profile] [cycles]   (default: all)
# Logs and traces go to $OUT (or /tmp/attach).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); bin=$root/.gpu/bin; py=${PYTHON:-python3}
out=${OUT:-/tmp/attach}; mkdir -p "$out"
gt=$bin/bin-gpu-tools
[ -x "$gt" ] || { echo "missing $gt (stage the workspace)"; exit 1; }
# The embedded injection library is the one under test (not a staged copy from another build).
unset GPU_TOOLS_INJECT_LIB
parts=${*:-torch c jax coexist bad ctrlc profile cycles}
STEPS=${STEPS:-8000}

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
section() { printf '\n=== %s\n' "$*"; }

if [[ " $parts " == *" torch "* ]]; then
  section "torch: untouched reference run ($STEPS steps)"
  timeout 300 $py "$root/gpu-host/python/attach_target.py" --steps "$STEPS" --profile-steps 20 > "$out/torch-untouched.log" 2>&1
  echo "rc=$?"; grep -E '^(steps|result|torch_profiler)' "$out/torch-untouched.log"
  section "torch: the same job, traced with --pid for 3 s twice"
  $py "$root/gpu-host/python/attach_target.py" --steps "$STEPS" --profile-steps 20 > "$out/torch-attached.log" 2>&1 &
  job=$!
  pid=$(wait_ready "$out/torch-attached.log")
  sleep 1
  for n in 1 2; do
    t0=$(date +%s%N)
    timeout 60 "$gt" trace --pid "$pid" --duration 3 -q -o "$out/torch-attach$n.gputrace" > "$out/torch-attach$n.txt" 2> "$out/torch-attach$n.err"
    echo "attach $n: rc=$? wall=$((($(date +%s%N) - t0) / 1000000)) ms"
    grep -m1 -- '--- summary' "$out/torch-attach$n.txt"; head -c 1500 "$out/torch-attach$n.err"
    grep progress "$out/torch-attached.log" | tail -1
    sleep 1
  done
  wait $job; echo "job rc=$?"
  grep -E '^(steps|result|torch_profiler)' "$out/torch-attached.log"
  section "torch: launched trace of 2000 steps, for kernels per step"
  timeout 300 "$gt" trace -q -o "$out/torch-launched.gputrace" -- $py "$root/gpu-host/python/attach_target.py" --steps 2000 > "$out/torch-launched.txt" 2>&1
  echo "rc=$?"; grep -E -- '^(steps|--- summary)' "$out/torch-launched.txt"
fi

if [[ " $parts " == *" c "* ]]; then
  section "C program without CUPTI, traced with --pid"
  nvcc -O2 -gencode arch=compute_90,code=sm_90 -o /tmp/attach_probe "$root/gpu-host/scripts/attach_probe.cu" || exit 1
  /tmp/attach_probe 8 > "$out/c.log" 2>&1 &
  job=$!
  pid=$(wait_ready "$out/c.log")
  grep -c cupti "/proc/$pid/maps" | sed 's/^/CUPTI mappings before: /'
  sleep 1
  timeout 60 "$gt" trace --pid "$pid" --duration 3 -q -o "$out/c.gputrace" 2>&1 | grep -v '^ *[0-9]' ; echo "trace rc=${PIPESTATUS[0]}"
  grep -c cupti "/proc/$pid/maps" | sed 's/^/CUPTI mappings after: /'
  wait $job; echo "job rc=$?"; cat "$out/c.log"
fi

if [[ " $parts " == *" jax "* ]]; then
  section "JAX, traced with --pid"
  $py "$root/gpu-host/python/attach_jax.py" --seconds 12 > "$out/jax.log" 2>&1 &
  job=$!
  pid=$(wait_ready "$out/jax.log")
  sleep 1
  timeout 60 "$gt" trace --pid "$pid" --duration 3 -q -o "$out/jax.gputrace" > "$out/jax.txt" 2>&1; echo "trace rc=$?"
  grep -E -- '--- summary|gpu-tools trace' "$out/jax.txt"
  wait $job; echo "job rc=$?"; tail -2 "$out/jax.log"
fi

if [[ " $parts " == *" coexist "* ]]; then
  section "coexistence: torch.profiler's kernel count alone, under a launched trace, after an attach"
  timeout 300 $py "$root/gpu-host/python/attach_target.py" --steps 300 --profile-steps 20 2>&1 | grep torch_profiler | sed 's/^/alone: /'
  timeout 300 "$gt" trace -q -- $py "$root/gpu-host/python/attach_target.py" --steps 300 --profile-steps 20 > "$out/coexist-launched.txt" 2>&1
  grep torch_profiler "$out/coexist-launched.txt" | sed 's/^/launched under gpu-tools trace: /'
  grep -i "subscriber\|missing" "$out/coexist-launched.txt" | head -3
  $py "$root/gpu-host/python/attach_target.py" --steps 6000 --profile-steps 20 > "$out/coexist-attached.log" 2>&1 &
  job=$!
  pid=$(wait_ready "$out/coexist-attached.log")
  timeout 60 "$gt" trace --pid "$pid" --duration 1 -q > /dev/null 2>&1; echo "attach rc=$?"
  wait $job; echo "job rc=$?"
  grep torch_profiler "$out/coexist-attached.log" | sed 's/^/after an attach: /'
fi

if [[ " $parts " == *" bad "* ]]; then
  section "bad input"
  "$gt" trace --pid 999999 --duration 1; echo "no such pid: rc=$?"
  sleep 30 & s=$!
  "$gt" trace --pid $s --duration 1; echo "not CUDA: rc=$?"
  kill $s
  # A target that exits while the tracer attaches.
  /tmp/attach_probe 1.2 > /dev/null 2>&1 &
  sleep 1
  "$gt" trace --pid $! --duration 5 -q; echo "exits during the trace: rc=$?"
  # Another tracer holds it: a second gpu-tools trace --pid while the first is attached.
  /tmp/attach_probe 6 > "$out/bad-two.log" 2>&1 &
  job=$!
  pid=$(wait_ready "$out/bad-two.log")
  "$gt" trace --pid "$pid" --duration 3 -q > /dev/null 2>&1 &
  first=$!
  sleep 1
  "$gt" trace --pid "$pid" --duration 1 -q; echo "second tracer while the first is attached: rc=$?"
  wait $first; echo "first tracer rc=$?"
  wait $job; echo "job rc=$?"; tail -1 "$out/bad-two.log"
  # Another user, not root.
  id gtuser >/dev/null 2>&1 || useradd -M gtuser 2>/dev/null
  /tmp/attach_probe 4 > /dev/null 2>&1 &
  job=$!
  sleep 1
  cp "$gt" /tmp/gpu-tools-user && chmod 755 /tmp/gpu-tools-user
  su gtuser -s /bin/sh -c "/tmp/gpu-tools-user trace --pid $job --duration 1"; echo "as another user: rc=$?"
  for scope in 2 3; do
    if echo $scope > /proc/sys/kernel/yama/ptrace_scope 2>/dev/null; then
      su gtuser -s /bin/sh -c "/tmp/gpu-tools-user trace --pid $job --duration 1"; echo "ptrace_scope $scope: rc=$?"
    else
      echo "ptrace_scope $scope: cannot be set here ($(cat /proc/sys/kernel/yama/ptrace_scope 2>&1))"
    fi
  done
  echo 1 > /proc/sys/kernel/yama/ptrace_scope 2>/dev/null
  wait $job; echo "job rc=$?"
  # A static binary.
  printf 'int main(void){for(;;){}}\n' > /tmp/spin.c && gcc -static -O1 -o /tmp/spin /tmp/spin.c 2>/dev/null
  if [ -x /tmp/spin ]; then
    /tmp/spin & s=$!
    "$gt" trace --pid $s --duration 1; echo "static binary: rc=$?"
    kill $s
  else
    echo "static binary: no static libc here"
  fi
fi

if [[ " $parts " == *" ctrlc "* ]]; then
  section "Ctrl-C (SIGINT) in the middle of the trace, and SIGTERM"
  /tmp/attach_probe 8 > "$out/ctrlc.log" 2>&1 &
  job=$!
  pid=$(wait_ready "$out/ctrlc.log")
  "$gt" trace --pid "$pid" -q > "$out/ctrlc.txt" 2>&1 &
  t=$!
  sleep 2; kill -INT $t; wait $t; echo "trace after SIGINT: rc=$?"; tail -3 "$out/ctrlc.txt"
  "$gt" trace --pid "$pid" -q > "$out/term.txt" 2>&1 &
  t=$!
  sleep 2; kill -TERM $t; wait $t; echo "trace after SIGTERM: rc=$?"; tail -3 "$out/term.txt"
  wait $job; echo "job rc=$?"; tail -1 "$out/ctrlc.log"
fi

if [[ " $parts " == *" profile "* ]]; then
  section "profile --pid: refused before the process is touched"
  /tmp/attach_probe 3 > "$out/profile-job.log" 2>&1 &
  job=$!
  pid=$(wait_ready "$out/profile-job.log")
  "$gt" profile --pid "$pid" --pc-sampling; echo "profile --pid rc=$?"
  wait $job; echo "job rc=$?"; tail -1 "$out/profile-job.log"
fi

if [[ " $parts " == *" cycles "* ]]; then
  section "ten attach-trace-detach cycles of 0.5 s on one PyTorch job; its result against an untouched run"
  timeout 300 $py "$root/gpu-host/python/attach_target.py" --steps 4000 > "$out/cycles-untouched.log" 2>&1
  grep '^result' "$out/cycles-untouched.log" | sed 's/^/untouched: /'
  $py "$root/gpu-host/python/attach_target.py" --steps 4000 --profile-steps 20 > "$out/cycles.log" 2>&1 &
  job=$!
  pid=$(wait_ready "$out/cycles.log")
  ok=0
  for n in $(seq 10); do
    timeout 60 "$gt" trace --pid "$pid" --duration 0.5 -q > "$out/cycle$n.txt" 2>&1 && ok=$((ok + 1))
    grep -m1 -- '--- summary' "$out/cycle$n.txt" | cut -c1-110
  done
  echo "cycles that exited 0: $ok of 10"
  wait $job; echo "job rc=$?"; grep -E '^(result|torch_profiler)' "$out/cycles.log" | sed 's/^/attached ten times: /'
fi

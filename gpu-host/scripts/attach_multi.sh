#!/usr/bin/env bash
# Two-GPU runs of live attach: `trace --pid-tree` on a 2-rank DDP job under torchrun, and `where --pid-tree` on a
# hung 2-rank NCCL job. Stage first (scripts/gpu-stage), then, on a host with two GPUs:
#   bash gpu-host/scripts/attach_multi.sh [ddp] [hang]
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); gt=$root/.gpu/bin/bin-gpu-tools; py=${PYTHON:-python3}
out=${OUT:-/tmp/attach_multi}; mkdir -p "$out"
unset GPU_TOOLS_INJECT_LIB
parts=${*:-ddp hang}
torchrun="$py -m torch.distributed.run"
wait_line() { # FILE PATTERN: waits up to 120 s for a line matching PATTERN
  for _ in $(seq 1200); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "no '$2' in $1" >&2; cat "$1" >&2; return 1
}

if [[ " $parts " == *" ddp "* ]]; then
  echo "=== trace --pid-tree of torchrun (2-rank DDP)"
  $torchrun --nproc-per-node 2 "$root/gpu-host/python/ddp_job.py" --steps 6000 > "$out/ddp.log" 2>&1 &
  launcher=$!
  wait_line "$out/ddp.log" "ready .* rank 1" && wait_line "$out/ddp.log" "ready .* rank 0"
  sleep 1
  timeout 120 "$gt" trace --pid-tree "$launcher" --duration 3 -q -o "$out/ddp.gputrace" > "$out/ddp-trace.txt" 2>&1
  echo "trace rc=$?"
  grep -E -- '--- summary|gpu-tools trace' "$out/ddp-trace.txt"
  grep -i nccl "$out/ddp-trace.txt" | head -5
  "$gt" stats "$out/ddp.gputrace" 2>&1 | grep -iE "process|rank" | head -8
  wait $launcher; echo "torchrun rc=$?"; grep result "$out/ddp.log"
fi

if [[ " $parts " == *" hang "* ]]; then
  echo "=== where --pid-tree on a hung 2-rank NCCL job (rank 1 skips an all_reduce)"
  $torchrun --nproc-per-node 2 "$root/gpu-host/python/ddp_job.py" --steps 100000 --hang-rank 1 --hang-at 50 > "$out/hang.log" 2>&1 &
  launcher=$!
  wait_line "$out/hang.log" "skipped an all_reduce"
  sleep 3
  t0=$(date +%s%N)
  timeout 120 "$gt" where --yes --pid-tree "$launcher" --max-warps 2 > "$out/where.txt" 2>&1
  echo "where rc=$? in $((($(date +%s%N) - t0) / 1000000)) ms"
  cut -c1-220 "$out/where.txt" | head -60
  r1=$(pgrep -f 'ddp_job.py' | while read p; do tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx 'RANK=1' && echo $p; done | head -1)
  if [ -n "$r1" ]; then
    echo "--- where on rank 1 ($r1) alone, with its steps"
    timeout 60 "$gt" where --yes "$r1" --verbose --max-warps 1 2>&1 | cut -c1-200 | tail -25
  fi
  # Both ranks still run after the detach (the stuck one still stuck): their state, then the job is ended.
  for p in $(pgrep -f ddp_job.py); do echo "pid $p state $(awk '{print $3}' /proc/$p/stat)"; done
  kill $launcher; sleep 2; pkill -9 -f ddp_job.py; wait $launcher 2>/dev/null
fi

#!/usr/bin/env bash
# PC sampling by name (`profile --pid --pc-sampling`, twice, 2 s each) in a PyTorch job whose own torch.profiler ran
# one session before any attach, against the same job without it (gpu-host/python/own_profiler_job.py): whether a
# process whose own profiler used CUPTI's activity API first gives stall records (docs/driver-notes.md). Prints the
# windows' counts; the logs are in /tmp/op-*.
# Stage first (STAGE_ONLY='^gpu-tools$' scripts/gpu-stage), then, in the checkout that goes with .gpu/:
#   bash gpu-host/scripts/pc_own_profiler_probe.sh
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); gt=${GT:-$root/.gpu/bin/bin-gpu-tools}
for mode in plain profiled; do
  python3 "$root/gpu-host/python/own_profiler_job.py" "$mode" 25 > "/tmp/op-$mode.log" 2>&1 &
  job=$!
  for _ in $(seq 100); do grep -q ready "/tmp/op-$mode.log" && break; sleep 0.2; done
  pid=$(awk '/^ready/{print $2}' "/tmp/op-$mode.log")
  sleep 1
  for n in 1 2; do
    timeout 60 "$gt" profile --pid "$pid" --pc-sampling --duration 2 > "/tmp/op-$mode-pc$n.txt" 2>&1
    echo "$mode pc$n rc=$?"
  done
  grep -h "counted\|stall records from\|profiling not possible" /tmp/op-"$mode"-pc*.txt | cut -c1-330
  kill "$job" 2>/dev/null; wait "$job" 2>/dev/null
  grep -h "own profiler\|done" "/tmp/op-$mode.log"
done

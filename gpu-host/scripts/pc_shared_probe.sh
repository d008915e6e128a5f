#!/usr/bin/env bash
# Does PC sampling of one process give its stall records while other processes run kernels on the same GPU? One
# eager job (E) and one CUDA-graph job (G) of survival_job.py, each sampled for 1 s (`profile --pid --pc-sampling`):
# alone; beside one busy process (B1: an elementwise ATen kernel over 256 Mi floats, back to back); beside five
# (B1-B5, busy and eager training jobs); alone again once they ended. Each window's line: exit code, stall records,
# CUPTI's samples and how many it put outside the program's kernels (non-user).
# Found by the survival matrix (16 jobs on one H200, 2026-12-02): most PC sampling windows counted millions of
# samples, every one outside the program's kernels, and gave no record; one job alone had given thousands.
#
# Stage first, then: bash gpu-host/scripts/pc_shared_probe.sh     (OUT: logs, default /tmp/pc_shared_probe)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); gt=$root/.gpu/bin/bin-gpu-tools; py=${PYTHON:-python3}
job=$root/gpu-host/python/survival_job.py
out=${OUT:-/tmp/pc_shared_probe}; mkdir -p "$out"
unset GPU_TOOLS_INJECT_LIB
export STOP_FILE=$out/stop; rm -f "$STOP_FILE" "$out/bg-stop"
. "$root/gpu-host/support/job_ready.sh"
pcs() { # LABEL PID
  timeout 60 "$gt" profile --pid "$2" --duration 1 --pc-sampling > "$out/$1.txt" 2>&1
  local rc=$?
  echo "$1: rc=$rc records=$(grep -o '[0-9]* stall records from' "$out/$1.txt" | head -1 | cut -d' ' -f1)" \
    "$(grep -o 'counted [0-9]* samples in [0-9]* PC records ([0-9]* dropped, [0-9]* outside' "$out/$1.txt" | head -1)" \
    "$(grep -o 'held by another tool\|GetData failed: [A-Z_]*' "$out/$1.txt" | head -1)"
}
busy() { # LOG: an ATen elementwise kernel over 256 Mi floats, back to back, until $out/bg-stop exists
  STOP_FILE=$out/bg-stop $py -c '
import os, torch
x = torch.ones(256 << 20, device="cuda"); torch.cuda.synchronize(); print("ready", os.getpid(), flush=True)
while not os.path.exists(os.environ["STOP_FILE"]):
    for _ in range(20): x.mul_(1.0000001)
    torch.cuda.synchronize()
' > "$1" 2>&1 &
}
$py "$job" eager --seconds 300 > "$out/E.log" 2>&1 & e_job=$!
$py "$job" graph --seconds 300 > "$out/G.log" 2>&1 & g_job=$!
e=$(job_ready "$out/E.log" 90) && g=$(job_ready "$out/G.log" 90) || { echo "a target did not start"; tail -5 "$out"/[EG].log; exit 1; }
sleep 1
nvidia-smi --query-compute-apps=pid,name --format=csv,noheader | sed 's/^/on the GPU: /'
pcs alone-E "$e"; pcs alone-G "$g"
busy "$out/B1.log"; job_ready "$out/B1.log" 90 > /dev/null; sleep 1
pcs one-busy-E "$e"; pcs one-busy-G "$g"
busy "$out/B2.log"; busy "$out/B3.log"
STOP_FILE=$out/bg-stop $py "$job" eager --seconds 300 > "$out/B4.log" 2>&1 &
STOP_FILE=$out/bg-stop $py "$job" eager --seconds 300 > "$out/B5.log" 2>&1 &
for b in 2 3 4 5; do job_ready "$out/B$b.log" 90 > /dev/null; done; sleep 1
echo "processes on the GPU: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l)"
pcs five-E "$e"; pcs five-G "$g"
touch "$out/bg-stop"
for _ in $(seq 100); do [ "$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l)" -le 2 ] && break; sleep 0.2; done
echo "processes on the GPU: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l)"
pcs again-alone-E "$e"; pcs again-alone-G "$g"
touch "$STOP_FILE"; wait "$e_job"; echo "E exit $?: $(grep '^result' "$out/E.log")"; wait "$g_job"; echo "G exit $?: $(grep '^result' "$out/G.log")"

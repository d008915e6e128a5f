#!/usr/bin/env bash
# Who makes the GPU's counters busy for another process's PC sampling: a 1 s `profile --pid --pc-sampling` of one
# eager job (E) after each suspect, with the time, the exit code, the stall records and any vendor error. Suspects: a
# kernel of another process that does not end (hung_job.cu), the CUDA debugger's attach to that process (`where`)
# while it hangs, after its release and after its exit; a metrics window (CUPTI's range profiler) of another eager
# job (F) and of a job whose metrics end early at a CUDA graph launch (G, serving-like), after each ended.
# Found by the survival matrix's 16 rows on one H200 (2026-12-02): PC sampling windows got CUPTI_ERROR_UNKNOWN from
# cuptiPCSamplingGetData and metrics windows "counters in use" although the matrix's lock kept its device-wide
# tools apart.
#
# Stage first, then: bash gpu-host/scripts/counters_holders.sh     (OUT: logs, default /tmp/counters_holders)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); gt=$root/.gpu/bin/bin-gpu-tools; py=${PYTHON:-python3}
job=$root/gpu-host/python/survival_job.py
out=${OUT:-/tmp/counters_holders}; mkdir -p "$out"
unset GPU_TOOLS_INJECT_LIB
ts() { date +%T.%N | cut -c1-12; }
. "$root/gpu-host/support/job_ready.sh"
pcs() { # LABEL PID
  timeout 60 "$gt" profile --pid "$2" --duration 1 --pc-sampling > "$out/$1.txt" 2>&1
  local rc=$?
  echo "$(ts) pc-sampling $1: rc=$rc $(grep -o '[0-9]* stall records from [0-9.]* s' "$out/$1.txt" | head -1);" \
    "$(grep -o 'GetData failed: [A-Z_]*\|counters are in use\|[0-9]* outside the program.s kernels' "$out/$1.txt" | head -1)"
}
metrics() { # LABEL PID
  timeout 60 "$gt" profile --pid "$2" --duration 1 > "$out/$1.txt" 2>&1
  local rc=$?
  echo "$(ts) metrics $1: rc=$rc $(grep -o 'counters are in use\|[0-9]* kernel launches profiled\|range profiler ended after [0-9.]* s\|PM sampling attribution failed' "$out/$1.txt" | tr '\n' ';')"
}
nvcc -O2 -std=c++17 -o "$out/hung_job" "$root/gpu-host/scripts/hung_job.cu" > "$out/nvcc.txt" 2>&1 || { cat "$out/nvcc.txt"; exit 1; }
echo "$(ts) start"
STOP_FILE=$out/e.stop $py "$job" eager --seconds 150 > "$out/e.log" 2>&1 & e_job=$!
STOP_FILE=$out/f.stop $py "$job" eager --seconds 150 > "$out/f.log" 2>&1 & f_job=$!
STOP_FILE=$out/g.stop $py "$job" serving --seconds 150 > "$out/g.log" 2>&1 & g_job=$!
e=$(job_ready "$out/e.log") && f=$(job_ready "$out/f.log") && g=$(job_ready "$out/g.log") || { echo "a job printed no ready line"; tail -5 "$out"/?.log; exit 1; }
sleep 3
pcs fresh "$e"
# A kernel of another process that does not end, then the debugger on it.
rm -f "$out/hang" "$out/release" "$out/h.stop"
HANG_FILE=$out/hang RELEASE_FILE=$out/release STOP_FILE=$out/h.stop HANG_LIMIT=60 "$out/hung_job" --seconds 100 > "$out/h.log" 2>&1 & h_job=$!
h=$(job_ready "$out/h.log") || { echo "hung_job printed no ready line"; exit 1; }
touch "$out/hang"; for _ in $(seq 100); do grep -q '^hung ' "$out/h.log" && break; sleep 0.1; done; sleep 1
pcs beside-hung-kernel "$e"
timeout 60 "$gt" where --yes "$h" > "$out/where.txt" 2>&1; rc=$?; echo "$(ts) where (debugger) of the hung job: rc=$rc $(grep -c 'wait_flag' "$out/where.txt") lines name its kernel"
pcs hung-after-debugger "$e"
touch "$out/release"; for _ in $(seq 100); do grep -q '^released ' "$out/h.log" && break; sleep 0.1; done
pcs released-after-debugger "$e"
touch "$out/h.stop"; wait "$h_job"; rc=$?; echo "$(ts) hung job ended: rc=$rc $(grep '^result' "$out/h.log")"
pcs debugged-job-gone "$e"
# Range profiler windows of other jobs, then PC sampling of E.
metrics f-metrics "$f"
pcs after-f-metrics "$e"
metrics g-metrics "$g"
pcs after-g-metrics "$e"
pcs g-itself "$g"
touch "$out/e.stop" "$out/f.stop" "$out/g.stop"
for j in e f g; do wait "$(eval echo \$${j}_job)"; rc=$?; echo "$(ts) job $j: rc=$rc $(grep -m1 '^result' "$out/$j.log")"; done

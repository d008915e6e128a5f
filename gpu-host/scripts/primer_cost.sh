#!/usr/bin/env bash
# Where a first trace's time goes when the PC sampling before it runs: one eager job, one `trace --pid` of 0.5 s
# with the tool's log (RUST_LOG=info), each line stamped with the time since the command began.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); gt=$root/.gpu/bin/bin-gpu-tools; py=${PYTHON:-python3}
out=${OUT:-/tmp/primer_cost}; mkdir -p "$out"
export STOP_FILE=$out/stop; rm -f "$STOP_FILE"
$py "$root/gpu-host/python/survival_job.py" eager --seconds 120 > "$out/job.log" 2>&1 & job=$!
for _ in $(seq 600); do grep -q '^ready' "$out/job.log" && break; sleep 0.1; done
pid=$(grep -m1 -o '^ready [0-9]*' "$out/job.log" | cut -d' ' -f2)
sleep 2
stamp() { $py -u -c 'import sys, time
t0 = time.monotonic()
for line in sys.stdin:
    print(f"{(time.monotonic() - t0) * 1e3:8.1f} ms  {line}", end="", flush=True)'; }
{ RUST_LOG=${LOG:-info} "$gt" trace --pid "$pid" --duration 0.5 -q -o "$out/first.gputrace" 2>&1; echo "exit $?"; } | stamp > "$out/first.txt"
{ RUST_LOG=${LOG:-info} "$gt" trace --pid "$pid" --duration 0.5 -q -o "$out/second.gputrace" 2>&1; echo "exit $?"; } | stamp > "$out/second.txt"
touch "$STOP_FILE"; wait $job
echo "job: $(grep '^result' "$out/job.log")"
grep -v '^ *[0-9.]* ms  *[0-9]' "$out/first.txt" | cut -c1-220
echo "--- second trace"; tail -3 "$out/second.txt" | cut -c1-220

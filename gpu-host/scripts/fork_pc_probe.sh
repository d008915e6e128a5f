#!/usr/bin/env bash
# PC sampling windows (`profile --pid --pc-sampling`, 1 s) on a job one of whose threads forks all the time
# (fork_job.py): for each tool binary given (default .gpu/bin/bin-gpu-tools), one fresh job and WINDOWS windows in a
# row. Prints each window's exit code, time, stall records and whether the library failed to answer, and whether the
# job lived to print its result. A stop that holds a thread inside fork() (the CUDA driver's fork handler holding
# its locks) made the matrix's fork-child job hang the library's call for 30 s and then die in
# cuptiPCSamplingDisable.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); py=${PYTHON:-python3}
out=${OUT:-/tmp/fork_pc_probe}; mkdir -p "$out"
windows=${WINDOWS:-6}
. "$root/gpu-host/support/job_ready.sh"
tools=("$@"); [ ${#tools[@]} -gt 0 ] || tools=("$root/.gpu/bin/bin-gpu-tools")
for gt in "${tools[@]}"; do
  name=$(basename "$(dirname "$gt")")-$(basename "$gt")
  export STOP_FILE=$out/$name.stop; rm -f "$STOP_FILE"
  $py "$root/gpu-host/python/fork_job.py" --seconds 150 > "$out/$name.job.log" 2>&1 &
  job=$!
  pid=$(job_ready "$out/$name.job.log" 60) || { echo "$name: the job did not start"; cat "$out/$name.job.log"; continue; }
  sleep 1
  for w in $(seq "$windows"); do
    f=$out/$name.w$w.txt
    start=$(date +%s%N)
    RUST_LOG=${LOG:-info} timeout 100 "$gt" profile --pid "$pid" --pc-sampling --duration 1 > "$f" 2>&1; rc=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    records=$(grep -o '[0-9]* stall records' "$f" | head -1 | cut -d' ' -f1)
    noanswer=$(grep -c 'did not answer within' "$f")
    forkseen=$(grep -o 'libc.so[.0-9]* in its frame [0-9]*' "$f" | head -1)
    alive=yes; kill -0 "$pid" 2>/dev/null || alive=no
    echo "$name window $w rc=$rc ms=$ms stall_records=${records:-none} no_answer=$noanswer alive=$alive ${forkseen:+fork-seen:$forkseen}"
    [ "$alive" = yes ] || break
  done
  touch "$STOP_FILE"; wait "$job"; jrc=$?
  echo "$name job exit $jrc: $(grep '^result' "$out/$name.job.log" || echo 'no result')"
  grep -m3 -i 'segmentation\|fatal\|signal' "$out/$name.job.log"
done

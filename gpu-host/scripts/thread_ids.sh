#!/usr/bin/env bash
# Export thread tracks named by the Linux thread id: a launched trace has CUPTI write `gettid()` ids (tracks
# `TID N ...`, the ids the program printed); an attached trace leaves the program's setting as it is (tracks
# `thread N ...`, CUPTI's default pthread ids); torch.profiler's own ids for the same threads are printed beside them.
# Stage first (STAGE_ONLY='gpu-tools' scripts/gpu-stage), then, in the checkout that goes with .gpu/:
#   bash gpu-host/scripts/thread_ids.sh            (logs and traces in $OUT, default /tmp/thread_ids)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); gt=$root/.gpu/bin/bin-gpu-tools; py=${PYTHON:-python3}
out=${OUT:-/tmp/thread_ids}; mkdir -p "$out"
[ -x "$gt" ] || { echo "missing $gt (stage the workspace)"; exit 1; }
unset GPU_TOOLS_INJECT_LIB
target=$root/gpu-host/python/thread_tids.py
fail=0

# tracks FILE.json: the host-thread track names of a Chrome export.
tracks() {
  $py - "$1" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
print("\n".join(sorted({e["args"]["name"] for e in ev if e.get("name") == "thread_name"
                        and ("CUDA" in e["args"]["name"] or "NVTX" in e["args"]["name"])})))
PY
}

echo "=== launched: tracks by Linux thread id"
timeout 300 "$gt" trace -q -o "$out/launched.gputrace" -- $py "$target" > "$out/launched.txt" 2>&1
echo "trace rc=$?"
"$gt" export "$out/launched.gputrace" --chrome "$out/launched.json" || fail=1
grep '^tid ' "$out/launched.txt"
tracks "$out/launched.json" | tee "$out/launched.tracks"
for tid in $(awk '/^tid /{print $3}' "$out/launched.txt"); do
  grep -q "^TID $tid CUDA runtime" "$out/launched.tracks" && echo "ok: TID $tid has a track" \
    || { echo "FAIL: no track for TID $tid"; fail=1; }
done

echo "=== torch.profiler (Kineto) alone, for comparison: the ids it gives the same threads (not checked)"
# Under a launched trace Kineto gets no CUPTI (CUPTI 13.0 has one subscriber, and the trace holds it), so it runs
# alone here. Kineto names threads by ids of its own choosing (for some threads not the Linux id).
timeout 300 $py "$target" --profile "$out/kineto-torch.json" > "$out/kineto.txt" 2>&1
echo "python rc=$?"
grep -E '^(tid|kineto_tids)' "$out/kineto.txt"

echo "=== attached: the program's setting is left alone (tracks by CUPTI's own ids, labelled as before)"
$py "$target" --steps 2000000 > "$out/attached.log" 2>&1 &
job=$!
sleep 8
timeout 60 "$gt" trace --pid "$job" --duration 2 -q -o "$out/attached.gputrace" > "$out/attached.txt" 2>&1
echo "trace rc=$?"
kill "$job" 2>/dev/null; wait "$job" 2>/dev/null
"$gt" export "$out/attached.gputrace" --chrome "$out/attached.json" && tracks "$out/attached.json"

echo "=== result: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail

#!/usr/bin/env bash
# How close the per-kernel counters of `trace --counters` (PM sampling, attributed to kernels by `gpu-tools stats`)
# come to the range profiler's (`gpu-tools profile`, kernel replay) and to what is known, on the GPU host:
#   copy    benches/gpu/counters_copy.cu: a copy kernel of known DRAM bytes, each launch lasting tens of sampling
#           periods: DRAM bytes read and written per launch against the known bytes and profile's (bar: 5%)
#   matmul  gpu-host/python/bf16_matmul.py --size 16384 (about 12 ms a matmul on an H100): SM active and tensor
#           active against profile's (bar: 5 points)
#   torch   gpu-host/python/torch_train.py: every kernel name with at least MIN_SAMPLES samples, next to profile's
#   sweep   trace --counters at 1 ms, 0.5 ms, 0.25 ms, 0.1 ms on a busy GPU (bf16_matmul.py) and an idle one:
#           samples, lost, gaps, gpu-tools' CPU time: the shortest interval sustained without loss
# Stage first (scripts/gpu-stage; STAGE_ONLY='gpu-tools' is enough), then in the checkout that goes with .gpu/:
#   bash benches/gpu/counters_accuracy.sh [copy] [matmul] [torch] [sweep]   (default: all; INTERVAL=1ms)
#
# The per-kernel counters are the `cuda_gpu_kern_counters_sum` report of `gpu-tools stats --format json`; its
# column names are in COLUMNS below (change them there if the report changes). DRAM bytes there are what the
# samples saw of a kernel's time (not extrapolated): per launch here they are divided by the launches and by the
# covered share.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); gt=$root/.gpu/bin/bin-gpu-tools; py=${PYTHON:-python3}
[ -x "$gt" ] || { echo "missing $gt (stage the workspace)"; exit 1; }
out=${OUT:-/tmp/counters_accuracy}; mkdir -p "$out"; unset GPU_TOOLS_INJECT_LIB
parts=${*:-copy matmul torch sweep}; INTERVAL=${INTERVAL:-1ms}; MIN_SAMPLES=${MIN_SAMPLES:-20}
# nvcc of the CUDA install where it is not on the PATH.
export PATH="$PATH:${CUDA_HOME:-/usr/local/cuda}/bin"
metrics=dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_active.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed
section() { printf '\n=== %s (%s)\n' "$*" "$(date +%T)"; }

# measure NAME CMD...: the program under trace --counters (stats JSON to $out/NAME.stats.json) and under profile
# (JSON to $out/NAME.profile.json).
measure() {
  local name=$1; shift
  timeout 900 "$gt" trace -q --counters --counter-interval "$INTERVAL" -o "$out/$name.gputrace" -- "$@" \
    > "$out/$name.trace.txt" 2>&1
  echo "trace rc=$?"; grep -E '^counters:' "$out/$name.trace.txt"
  "$gt" stats --format json --report cuda_gpu_kern_counters_sum "$out/$name.gputrace" > "$out/$name.stats.json"
  echo "stats rc=$?"
  timeout 1800 "$gt" profile --metrics "$metrics" --json -o "$out/$name.profile.json" -- "$@" \
    > "$out/$name.profile.txt" 2>&1
  echo "profile rc=$?"; grep -v '^ *$' "$out/$name.profile.txt" | tail -3
}

# compare NAME MODE [KNOWN_READ KNOWN_WRITE]: the table of NAME's kernels (MODE copy: against the known bytes per
# launch; matmul: SM and tensor active; torch: every name with MIN_SAMPLES samples).
compare() {
  $py - "$out/$1.stats.json" "$out/$1.profile.json" "$2" "${3:-0}" "${4:-0}" "$MIN_SAMPLES" <<'PY'
import json, sys

stats_path, profile_path, mode, known_read, known_write, min_samples = sys.argv[1:7]
known_read, known_write, min_samples = float(known_read), float(known_write), int(min_samples)

# COLUMNS: the `cuda_gpu_kern_counters_sum` report of `gpu-tools stats --format json` (one object per row, keyed by
# column name). Change them here if the report's columns change.
REPORT = "cuda_gpu_kern_counters_sum"
COLUMNS = {
    "name": "Name",
    "gpu_time": "GPU Time (ns)",
    "launches": "Launches",
    "covered_pct": "Covered (%)",
    "samples": "Samples",
    "sm": "SM Active (%)",
    "tensor": "Tensor Active (%)",
    "read": "DRAM Read (B)",
    "write": "DRAM Write (B)",
    "attribution": "Attribution",
}
SM = "sm__cycles_active.avg.pct_of_peak_sustained_elapsed"
TENSOR = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"

try:
    tables = json.load(open(stats_path))
    table = next(t for t in tables if t.get("name") == REPORT)
except (OSError, ValueError, StopIteration) as e:
    print(f"no {REPORT} report in {stats_path} ({e}): is this build's stats the one with the counters report?")
    sys.exit(1)
for note in table.get("notes", []):
    print("stats note:", note)
try:
    profile = {r["kernel"]: r for r in json.load(open(profile_path))}
except (OSError, ValueError) as e:
    print(f"no profile JSON in {profile_path} ({e})")
    profile = {}

def base(name):
    return name.split("(")[0].split("<")[0].strip()

def prof_of(name):
    if name in profile:
        return profile[name]
    same = [r for k, r in profile.items() if base(k) == base(name)]
    return same[0] if len(same) == 1 else None

def mean(p, metric):
    m = (p or {}).get("metrics", {}).get(metric) or {}
    return m.get("mean")

def f(v, digits=1):
    return "-" if v is None else f"{v:.{digits}f}"

def per_launch(row, column):
    v, launches, covered = row.get(COLUMNS[column]), row.get(COLUMNS["launches"]), row.get(COLUMNS["covered_pct"])
    if v is None or not launches or not covered:
        return None
    return v / launches / (covered / 100.0)

failed = False
rows = table.get("rows", [])
for row in sorted(rows, key=lambda r: -(r.get(COLUMNS["samples"]) or 0)):
    name = row.get(COLUMNS["name"], "?")
    samples = row.get(COLUMNS["samples"]) or 0
    p = prof_of(name)
    head = (f"{name[:90]}\n    launches {row.get(COLUMNS['launches'])} (profile {p['launches'] if p else '-'}), "
            f"covered {f(row.get(COLUMNS['covered_pct']))}%, samples {samples}, {row.get(COLUMNS['attribution'])}")
    if mode == "copy":
        if "copy_passes" not in name:
            continue
        print(head)
        for what, col, metric, known in (("DRAM read", "read", "dram__bytes_read.sum", known_read),
                                         ("DRAM write", "write", "dram__bytes_write.sum", known_write)):
            t, pr = per_launch(row, col), mean(p, metric)
            err = None if t is None else 100.0 * (t - known) / known
            ok = err is not None and abs(err) <= 5.0
            failed |= not ok
            print(f"    {what} per launch: trace {f(t and t / 1e9, 3)} GB, profile {f(pr and pr / 1e9, 3)} GB, "
                  f"known {known / 1e9:.3f} GB: trace {f(err, 2)}% off the known bytes "
                  f"({'within' if ok else 'NOT within'} 5%)")
    elif mode == "matmul":
        # The matmul: the name with the most GPU time.
        if row is not max(rows, key=lambda r: r.get(COLUMNS["gpu_time"]) or 0):
            continue
        print(head)
        for what, col, metric in (("SM active", "sm", SM), ("tensor active", "tensor", TENSOR)):
            t, pr = row.get(COLUMNS[col]), mean(p, metric)
            diff = None if t is None or pr is None else t - pr
            ok = diff is not None and abs(diff) <= 5.0
            failed |= not ok
            print(f"    {what}: trace {f(t)}%, profile {f(pr)}%: {f(diff)} points "
                  f"({'within' if ok else 'NOT within'} 5)")
    else:
        if samples < min_samples:
            continue
        print(head)
        mb = lambda v: None if v is None else v / 1e6
        print(f"    SM active {f(row.get(COLUMNS['sm']))}% (profile {f(mean(p, SM))}), tensor active "
              f"{f(row.get(COLUMNS['tensor']))}% (profile {f(mean(p, TENSOR))}), DRAM read per launch "
              f"{f(mb(per_launch(row, 'read')), 3)} MB (profile {f(mb(mean(p, 'dram__bytes_read.sum')), 3)}), "
              f"write {f(mb(per_launch(row, 'write')), 3)} MB (profile "
              f"{f(mb(mean(p, 'dram__bytes_write.sum')), 3)})")
if mode in ("copy", "matmul"):
    print("bar:", "MET" if not failed else "NOT MET")
PY
}

if [[ " $parts " == *" copy "* ]]; then
  section "copy kernel of known bytes ($INTERVAL samples)"
  nvcc -O2 -gencode arch=compute_90,code=sm_90 -o /tmp/counters_copy "$root/benches/gpu/counters_copy.cu" || exit 1
  /tmp/counters_copy | tee "$out/copy.native.txt"
  read -r r w ms < <(awk '{print $5, $7, $9}' "$out/copy.native.txt")
  echo "per launch: $r bytes read, $w written, $ms ms ($(awk -v m="$ms" -v i="$INTERVAL" 'BEGIN { sub(/ms$/, "", i); printf "%.0f", m / i }') sampling periods at $INTERVAL if in ms)"
  measure copy /tmp/counters_copy
  compare copy copy "$r" "$w"
fi

if [[ " $parts " == *" matmul "* ]]; then
  section "bf16 matmul 16384 ($INTERVAL samples)"
  measure matmul $py "$root/gpu-host/python/bf16_matmul.py" --size 16384 --iters 30
  compare matmul matmul
fi

if [[ " $parts " == *" torch "* ]]; then
  section "torch_train.py: names with at least $MIN_SAMPLES samples"
  measure torch $py "$root/gpu-host/python/torch_train.py" --steps "${STEPS:-300}"
  compare torch torch
fi

if [[ " $parts " == *" sweep "* ]]; then
  section "interval sweep: samples, lost and gaps, gpu-tools CPU; busy (bf16 matmul) and idle (sleep)"
  tck=$(getconf CLK_TCK)
  printf '%-6s %-9s %10s %8s %8s %10s %14s\n' load interval samples lost gaps rc gpu-tools_cpu_ms
  for load in busy idle; do
    for i in ${INTERVALS:-1ms 0.5ms 0.25ms 0.1ms}; do
      case $load in
        busy) prog=("$py" "$root/gpu-host/python/bf16_matmul.py" --seconds 10) ;;
        idle) prog=(sleep 10) ;;
      esac
      log=$out/sweep-$load-$i.txt
      "$gt" trace -q --counters --counter-interval "$i" -- "${prog[@]}" > "$log" 2>&1 &
      pid=$!
      stat=""
      while s=$(cat "/proc/$pid/stat" 2>/dev/null) && [ -n "$s" ]; do
        stat=$s; case "${s##*) }" in Z*) break ;; esac; sleep 0.1
      done
      wait $pid; rc=$?
      cpu=$(echo "$stat" | awk -v t="$tck" '{ sub(/^.*\) /, ""); print int(($12 + $13) * 1000 / t) }')
      line=$(grep -m1 '^counters:' "$log")
      printf '%-6s %-9s %10s %8s %8s %10s %14s\n' "$load" "$i" "$(echo "$line" | awk '{print $2}')" \
        "$(echo "$line" | grep -o '[0-9]* lost' | awk '{print $1}')" \
        "$(echo "$line" | grep -o '[0-9]* gaps' | awk '{print $1}')" "$rc" "$cpu"
      [ -z "$line" ] && head -5 "$log"
    done
  done
  echo "(sleep is no CUDA program: its traces end with exit 1, after the samples were taken; the counters line stands)"
fi

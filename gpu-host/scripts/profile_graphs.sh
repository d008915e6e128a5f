#!/usr/bin/env bash
# gpu-tools profile on CUDA graphs next to Nsight Compute, on a GPU host (CUDA 13, Python with PyTorch 2.x, ncu).
# Stage first, on the build machine:
#
#   STAGE_ONLY='gpu-tools' scripts/gpu-stage
#
# then on the GPU host, in the repository checkout that goes with .gpu/:
#
#   bash gpu-host/scripts/profile_graphs.sh [STEPS]      (default 20)
#
# The program is gpu-host/python/compiled_graphs.py (torch.compile(mode="reduce-overhead"): Triton kernels
# replayed through CUDA graphs, an eager optimizer step). It runs once natively to fill Inductor's caches (a run
# that compiles also benchmarks kernels, which would change the counts), then under:
#   gpu-tools profile --graph-profiling node     and   ncu --graph-profiling node
#   gpu-tools profile --graph-profiling graph    and   ncu --graph-profiling graph
# each with gpu__time_duration.sum (ncu with --cache-control none --clock-control none, as the range profiler does
# neither). It prints the profiled counts side by side, the names whose counts differ (mangled names on both
# sides), the top rows of each, and what the injection library said about the graphs. Files go to $OUT
# (default .gpu/out/graphs).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
stage="$root/.gpu"
bin="$stage/bin"
steps="${1:-20}"
out="${OUT:-$stage/out}/graphs"
gt="$bin/bin-gpu-tools"
ncu_bin=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
py=(python3 "$root/gpu-host/python/compiled_graphs.py" --steps "$steps")
mkdir -p "$out"
[ -f "$bin/libgpu_tools_inject.so" ] && export GPU_TOOLS_INJECT_LIB="$bin/libgpu_tools_inject.so"
for d in /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib64; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
# One cache for every run: compiled once, never benchmarked again.
export TORCHINDUCTOR_CACHE_DIR="$out/inductor-cache"
part() { printf '\n=== %s (%s)\n' "$1" "$(date +%T)"; }
metric=gpu__time_duration.sum

part "native, twice (the first fills Inductor's caches)"
"${py[@]}"
"${py[@]}"

for mode in node graph; do
  part "gpu-tools profile --graph-profiling $mode"
  GPU_TOOLS_TRACE_LOG=debug timeout 900 "$gt" profile --graph-profiling "$mode" --metrics "$metric" --csv --mangled \
    -o "$out/gpu-tools-$mode.csv" -- "${py[@]}" 2>"$out/gpu-tools-$mode.log"
  echo "exit $?"
  grep '^gpu-tools profile:' "$out/gpu-tools-$mode.log"
  echo "the injection library on graphs (first 10 lines):"
  grep -E 'gpu_tools_inject::profiling: graph [0-9]+|graph [0-9]+: |ranges profiled where|expected in' \
    "$out/gpu-tools-$mode.log" | cut -c1-300 | head -n 10

  part "ncu --graph-profiling $mode"
  rm -f "$out/ncu-$mode.ncu-rep"
  timeout 1800 "$ncu_bin" --graph-profiling "$mode" --metrics "$metric" --cache-control none --clock-control none \
    -o "$out/ncu-$mode" "${py[@]}" >"$out/ncu-$mode.log" 2>&1
  echo "exit $?"
  grep -E '==(ERROR|WARNING)==' "$out/ncu-$mode.log" | sort | uniq -c | head -n 10
  "$ncu_bin" --import "$out/ncu-$mode.ncu-rep" --csv --page raw --print-kernel-base mangled >"$out/ncu-$mode.csv"
done

part "counts and names, side by side"
python3 - "$out" <<'PY'
import collections, csv, re, sys

out = sys.argv[1]


def ours(mode):
    """Launches per name from `gpu-tools profile --csv` (one row per kernel and metric; one metric here)."""
    rows = collections.Counter()
    with open(f"{out}/gpu-tools-{mode}.csv", newline="") as f:
        for r in csv.DictReader(f):
            rows[r["kernel"]] += int(r["launches"])
    return rows


def ncu(mode):
    """Results per name from ncu's raw page: rows with a numeric ID (the second line gives units)."""
    rows = collections.Counter()
    with open(f"{out}/ncu-{mode}.csv", newline="") as f:
        for r in csv.DictReader(f):
            if not r.get("ID", "").strip().isdigit():
                continue
            name = r.get("Kernel Name") or r.get("Function Name") or r.get("Name") or "?"
            rows[name] += 1
    return rows


numbered = re.compile(r"^\d+$")
for mode in ("node", "graph"):
    g, n = ours(mode), ncu(mode)
    print(f"\n--graph-profiling {mode}: gpu-tools {sum(g.values())} in {len(g)} names, "
          f"ncu {sum(n.values())} in {len(n)} names")
    bad = [k for k in g if numbered.match(k)]
    print(f"  names that are bare numbers: {len(bad)} {bad[:5]}")
    if mode == "node":
        differ = sorted(set(g) | set(n), key=lambda k: -(g[k] + n[k]))
        differ = [k for k in differ if g[k] != n[k]]
        print(f"  names whose counts differ: {len(differ)}")
        for k in differ[:15]:
            print(f"    gpu-tools {g[k]:5d}  ncu {n[k]:5d}  {k[:110]}")
    print("  gpu-tools, most launched:")
    for k, c in g.most_common(12):
        print(f"    {c:5d}  {k[:120]}")
    print("  ncu, most profiled:")
    for k, c in n.most_common(12):
        print(f"    {c:5d}  {k[:120]}")
PY

part "notices that should not be there"
for mode in node graph; do
  echo "$mode: $(grep -c -E 'no CUDA context was seen|kernel records of graph nodes, left out' "$out/gpu-tools-$mode.log") \
lines about an unused process or left-out graph nodes"
done
echo "files in $out"

#!/usr/bin/env bash
# Counters per kernel from `gpu-tools trace --counters` on a GPU host (CUDA 13, Python with PyTorch): the
# attribution of `stats` (cuda_gpu_kern_counters_sum) next to known values and to the range profiler, and the
# counter tracks of `export`. Needs `trace --counters` (the counter collection). Stage first, on the build machine:
#
#   STAGE_ONLY='gpu-tools|counter_kernels' scripts/gpu-stage --features nvidia-hw-tests
#
# then on the GPU host, in the repository checkout that goes with .gpu/:
#   bash gpu-host/scripts/counters_attribution.sh [PART...]   (default: copy matmul torch export)
#   copy     a copy kernel of known bytes lasting many sample periods: its DRAM bytes read and written next to
#            the bytes it moved over the part of its time the samples covered (the bar: within 5%)
#   matmul   a bf16 matmul: SM active and tensor active per kernel, next to `gpu-tools profile` on the same kernel
#            (the bar: within 5 points)
#   torch    torch_train.py: the counters per kernel, then `profile --set basic` on the same loop
#   export   the Perfetto export of the torch trace: its size and its tracks, decoded (perfetto_tracks.py)
#   ddp      a 2-rank DDP job on a two-GPU host: one line per device, each rank's kernels on its own device
# COUNTERS overrides the counter option (default `--counters`), INTERVAL adds `--counters-interval INTERVAL`.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
stage="$root/.gpu"
bin="$stage/bin"
pydir="$root/gpu-host/python"
out="${OUT:-$stage/out}/counters"
gt="$bin/bin-gpu-tools"
export GPU_STAGE_BIN="$bin"
[ -f "$bin/libgpu_tools_inject.so" ] && export GPU_TOOLS_INJECT_LIB="$bin/libgpu_tools_inject.so"
for d in /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib64; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
read -r -a counters <<<"${COUNTERS:---counters}"
[ -n "${INTERVAL:-}" ] && counters+=(--counters-interval "$INTERVAL")
part() { printf '\n=== %s (%s)\n' "$1" "$(date +%T)"; }
mkdir -p "$out"
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(copy matmul torch export)

# The counters row of kernel NAME in the stats JSON on stdin, with what it should be: `row NAME [BYTES]` (BYTES read
# and written per launch, for the copy).
row() {
  python3 -c '
import json, sys
name, per_launch = sys.argv[1], (int(sys.argv[2]) if len(sys.argv) > 2 else None)
tables = json.load(sys.stdin)
rows = [r for t in tables if t["name"] == "cuda_gpu_kern_counters_sum" for r in t["rows"]]
notes = [n for t in tables if t["name"] == "cuda_gpu_kern_counters_sum" for n in t["notes"]]
for n in notes:
    print("note:", n)
hit = [r for r in rows if r["Name"].startswith(name)]
if not hit:
    print("no row for", name, "among", [r["Name"] for r in rows]); sys.exit(1)
r = hit[0]
print(json.dumps(r, indent=1))
if per_launch is not None:
    covered = r["Covered (%)"] / 100.0
    want = per_launch * r["Launches"] * covered
    for col in ("DRAM Read (B)", "DRAM Write (B)"):
        got = r[col]
        off = 100 * (got / want - 1) if got is not None and want else float("nan")
        print(f"{col}: {got} against {want:.0f} moved in the covered {100*covered:.1f}%: {off:+.2f}%")
' "$@"
}

for p in "${parts[@]}"; do
  case "$p" in
  copy)
    part "copy16: 4 GiB read and 4 GiB written per launch, 8 launches"
    bytes=$((4 << 30))
    timeout 300 "$gt" trace "${counters[@]}" -o "$out/copy.gputrace" -- \
      "$bin/example-counter_kernels" copy --bytes "$bytes" --repeat 8 | tail -n 5
    "$gt" stats --format json --report cuda_gpu_kern_counters_sum "$out/copy.gputrace" | row copy16 "$bytes"
    ;;
  matmul)
    part "bf16 matmul, 200 iterations: counters per kernel"
    timeout 300 "$gt" trace "${counters[@]}" -o "$out/matmul.gputrace" -- \
      python3 "$pydir/bf16_matmul.py" --iters 200 | tail -n 5
    "$gt" stats --report cuda_gpu_kern_counters_sum "$out/matmul.gputrace"
    part "bf16 matmul, 20 iterations: the range profiler on the same kernels"
    timeout 600 "$gt" profile --launches-per-kernel 5 \
      --metrics sm__cycles_active.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active \
      -- python3 "$pydir/bf16_matmul.py" --iters 20 | tail -n 20
    ;;
  torch)
    part "torch_train.py --steps 20: counters per kernel"
    timeout 600 "$gt" trace "${counters[@]}" -o "$out/torch.gputrace" -- \
      python3 "$pydir/torch_train.py" --steps 20 | tail -n 5
    "$gt" stats --report cuda_gpu_kern_counters_sum "$out/torch.gputrace"
    "$gt" stats --format json --report cuda_gpu_kern_counters_sum "$out/torch.gputrace" >"$out/torch-counters.json"
    part "torch_train.py --steps 20: profile --set basic"
    timeout 900 "$gt" profile --set basic -- python3 "$pydir/torch_train.py" --steps 20 | tail -n 40
    ;;
  export)
    part "the Perfetto export of the torch trace"
    [ -f "$out/torch.gputrace" ] || { echo "run the torch part first"; continue; }
    "$gt" export "$out/torch.gputrace" --perfetto "$out/torch.perfetto-trace"
    python3 "$pydir/perfetto_tracks.py" "$out/torch.perfetto-trace"
    "$gt" export "$out/torch.gputrace" --chrome "$out/torch.json.gz"
    ls -l "$out/torch.perfetto-trace" "$out/torch.json.gz"
    ;;
  ddp)
    part "2-rank DDP: counters on both devices"
    timeout 600 "$gt" trace "${counters[@]}" -o "$out/ddp.gputrace" -- \
      torchrun --nproc-per-node 2 "$pydir/ddp_job.py" --steps 300 | tail -n 5
    "$gt" stats --report cuda_gpu_kern_counters_sum,processes "$out/ddp.gputrace"
    ;;
  *) echo "unknown part $p" >&2; exit 2 ;;
  esac
done

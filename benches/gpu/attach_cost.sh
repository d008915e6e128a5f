#!/usr/bin/env bash
# GPU-host benchmarks of tracing cost, each configuration beside its baselines in the same run:
#  floor   the launch loop of launch_floor.cu (10,000 launch+synchronize steps) natively, with raw CUPTI recording
#          kernel, kernel+runtime and kernel+runtime+driver records, and under `gpu-tools trace` with
#          --kinds kernel, --no-api, --api launches and its defaults; ROUNDS interleaved rounds, medians;
#  torch   a running PyTorch job's step time before, while and after `trace --pid` is attached, against the same
#          job launched under `gpu-tools trace`; attach and detach latency.
# Stage first (scripts/gpu-stage), then in the checkout that goes with .gpu/:
#   bash benches/gpu/attach_cost.sh [floor] [torch]
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); gt=$root/.gpu/bin/bin-gpu-tools; py=${PYTHON:-python3}
out=${OUT:-/tmp/attach_cost}; mkdir -p "$out"; unset GPU_TOOLS_INJECT_LIB
parts=${*:-floor torch}; ROUNDS=${ROUNDS:-5}; STEPS=${STEPS:-10000}
cuda=${CUDA_HOME:-/usr/local/cuda}
median() { sort -g | awk '{a[NR]=$1} END {if (NR) print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}'; }

if [[ " $parts " == *" floor "* ]]; then
  inc=$(dirname "$(find "$cuda/" -name cupti.h 2>/dev/null | head -1)")
  lib=$(dirname "$(find "$cuda/" -name 'libcupti.so*' 2>/dev/null | head -1)")
  nvcc -O2 -gencode arch=compute_90,code=sm_90 -I"$inc" -L"$lib" -lcupti -Xlinker -rpath="$lib" \
    -o /tmp/launch_floor "$root/benches/gpu/launch_floor.cu" || exit 1
  configs="native kernel kernel+runtime kernel+runtime+driver gt-kernel gt-no-api gt-api-launches gt-default"
  for r in $(seq "$ROUNDS"); do
    for c in $configs; do
      case $c in
        gt-kernel) line=$("$gt" trace -q --kinds kernel -- /tmp/launch_floor native "$STEPS" 2>/dev/null | grep loop_ms) ;;
        gt-default) line=$("$gt" trace -q -- /tmp/launch_floor native "$STEPS" 2>"$out/gt-default.err" | grep loop_ms) ;;
        gt-no-api) line=$("$gt" trace -q --no-api -- /tmp/launch_floor native "$STEPS" 2>/dev/null | grep loop_ms) ;;
        gt-api-launches) line=$("$gt" trace -q --api launches -- /tmp/launch_floor native "$STEPS" 2>/dev/null | grep loop_ms) ;;
        *) line=$(/tmp/launch_floor "$c" "$STEPS") ;;
      esac
      echo "$c $line" >> "$out/floor.txt"
    done
  done
  native=$(grep '^native ' "$out/floor.txt" | awk '{print $3}' | median)
  printf '%-24s %10s %8s  %s\n' config "median_ms" "x native" "rounds"
  for c in $configs; do
    vals=$(grep "^$c " "$out/floor.txt" | awk '{print $3}')
    m=$(echo "$vals" | median)
    printf '%-24s %10.1f %8.3f  %s\n' "$c" "$m" "$(awk -v a="$m" -v b="$native" 'BEGIN { print a / b }')" \
      "$(echo $vals | tr ' ' ',')"
  done
  grep -m3 "left out\\|skipped" "$out/gt-default.err"
fi

if [[ " $parts " == *" torch "* ]]; then
  # progress lines: "progress STEPS SECONDS"; the step time of a window from the last line before it to the
  # last line inside it.
  window() { awk -v a="$2" -v b="$3" '$1=="progress" { if ($3<=a) {s0=$2; t0=$3} if ($3<=b) {s1=$2; t1=$3} }
    END { if (s1>s0) printf "%.4f", (t1-t0)*1000/(s1-s0); else print "-" }' "$1"; }
  for r in $(seq 2); do
    # The same job untouched, for the same windows of its run (a job's step time drifts as it runs).
    timeout 120 $py "$root/gpu-host/python/attach_target.py" --steps 9000 > "$out/untouched$r.log" 2>&1
    $py "$root/gpu-host/python/attach_target.py" --steps 9000 > "$out/job$r.log" 2>&1 &
    job=$!
    for _ in $(seq 600); do grep -q '^ready' "$out/job$r.log" && break; sleep 0.1; done
    pid=$(grep '^ready' "$out/job$r.log" | cut -d' ' -f2)
    t_start=$(date +%s.%N)
    sleep 4
    a0=$(date +%s.%N)
    RUST_LOG=info "$gt" trace --pid "$pid" --duration 4 -q > /dev/null 2> "$out/attach$r.err"
    a1=$(date +%s.%N)
    wait $job
    # Seconds since the job's first step, as its progress lines count them (no bc on the GPU hosts: awk).
    add() { awk -v a="$1" -v b="$2" -v c="$3" 'BEGIN { printf "%.3f", a - b + c }'; }
    b=$(add "$a0" "$t_start" 0); e=$(add "$a1" "$t_start" 0)
    for j in job untouched; do
      echo "round $r, $j: ms/step before $(window "$out/$j$r.log" 1 "$b") | attached $(window "$out/$j$r.log" "$(add "$b" 0 0.6)" "$e") | after $(window "$out/$j$r.log" "$(add "$e" 0 0.5)" "$(add "$e" 0 3.5)") | after, later $(window "$out/$j$r.log" "$(add "$e" 0 3.5)" "$(add "$e" 0 9)")"
    done
    grep -ho 'attached to process [0-9]* in [0-9]* ms[^)]*)\|every stream ended [0-9.]* ms after the stop byte' "$out/attach$r.err"
    "$gt" trace -q -- $py "$root/gpu-host/python/attach_target.py" --steps 3000 > "$out/launched$r.log" 2>&1
    echo "round $r: launched under gpu-tools trace: $(grep -o 'ms_per_step [0-9.]*' "$out/launched$r.log")"
  done
fi

#!/usr/bin/env bash
# The counter APIs on a GPU host (CUDA 13, Python with PyTorch, Nsight Compute). Stage first, on the build machine:
#
#   STAGE_ONLY='cupti_profiling_hw|cupti_counters_gpu|gpu-tools|counter_kernels|cupti_profile_record|pm_gaps' \
#     scripts/gpu-stage --features nvidia-hw-tests
#
# then on the GPU host, in the repository checkout that goes with .gpu/:
#   bash gpu-host/scripts/profiling.sh [PART...]   (default: info hw record top profile bad)
#   info     devices, driver, the counter permission setting, the catalogue of device 0
#   hw       the hardware tests (tests/cupti_profiling_hw.rs), with the library's debug log
#   record   counter-data fixtures into $OUT/cupti-counters/h100-cuda13 (for tests/fixtures/cupti-counters/)
#   top      gpu-tools top --json, idle and with a bf16 matmul in another process
#   gaps     why an idle GPU has sampling periods without a sample: pm_gaps idle, with a larger counter-data image,
#            with a 2 ms period, under load; then gpu-tools top's log of each gap and image restart
#   exporter gpu-tools top --prometheus, scraped idle and under load (promtool checks it where installed)
#   profile  gpu-tools profile on the copy and chase kernels next to ncu's numbers, and on torch_train.py
#   bad      bad input: unknown metric, wrong method, missing device, busy counters, no CUDA, small buffer
#   pc       gpu-tools profile --pc-sampling on the pointer chase, alone and with a metric
#   replay   what kernel replay costs a launch: copies of 1 MiB and 256 MiB natively, with a one-pass metric, with
#            sm__throughput (8 passes), and with --launches-per-kernel 1
#   eager    torch_train.py natively with lazy and with eager module loading
#   torchcost  where profiling torch_train.py spends its time: natively, traced, one metric, the basic set with
#            --launches-per-kernel 1 (timestamped injection log)
#   cost | sustained | torch    the benchmark's parts (bench-cupti_counters_gpu); slow: run them on their own
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
stage="$root/.gpu"
bin="$stage/bin"
pydir="$root/gpu-host/python"
out="${OUT:-$stage/out}"
gt="$bin/bin-gpu-tools"
run() { bash "$stage/run.sh" "$@"; }
# What .gpu/run.sh sets for the binaries it starts, for those started directly below.
export GPU_STAGE_BIN="$bin"
[ -f "$bin/libgpu_tools_inject.so" ] && export GPU_TOOLS_INJECT_LIB="$bin/libgpu_tools_inject.so"
for d in /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib64; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
part() { printf '\n=== %s (%s)\n' "$1" "$(date +%T)"; }
ncu_bin=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(info hw record top profile bad)

for p in "${parts[@]}"; do
  case "$p" in
  info)
    part "info"
    nvidia-smi --query-gpu=index,name,driver_version,memory.used,utilization.gpu --format=csv
    grep -i -E "RmProfilingAdminOnly|RestrictProfiling" /proc/driver/nvidia/params || true
    ls /usr/local/cuda/extras/CUPTI/lib64/ | grep -E "cupti|nvperf" || true
    timeout 60 "$gt" metrics --device 0 --method pm sm__cycles_active | head -5
    timeout 60 "$gt" metrics --device 0 --check sm__cycles_active.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum.per_second,dram__bytes_write.sum.per_second,sm__warps_active.avg.pct_of_peak_sustained_active --method pm
    ;;
  hw)
    part "hardware tests"
    RUST_LOG=gpu_tools=debug timeout 300 "$bin/test-cupti_profiling_hw" --test-threads=1 --nocapture 2>&1 | tail -n 200
    ;;
  record)
    part "record counter-data fixtures"
    mkdir -p "$out/cupti-counters"
    RUST_LOG=gpu_tools=debug timeout 120 "$bin/example-cupti_profile_record" --out "$out/cupti-counters/h100-cuda13" 2>&1 | tail -n 80
    ls -l "$out/cupti-counters/h100-cuda13"
    ;;
  top)
    part "gpu-tools top, idle"
    timeout 30 "$gt" top --json --duration 3
    part "gpu-tools top, bf16 matmul in another process"
    python3 "$pydir/bf16_matmul.py" --seconds 10 >/dev/null &
    load=$!
    sleep 4
    timeout 30 "$gt" top --json --duration 3
    timeout 30 "$gt" top --duration 2
    kill "$load" 2>/dev/null; wait "$load" 2>/dev/null
    ;;
  gaps)
    mkdir -p "$out"
    part "pm_gaps on an idle GPU"
    timeout 60 "$bin/example-pm_gaps" --seconds 5
    part "pm_gaps, idle, a counter-data image of 2000 samples (a tenth of the image restarts)"
    timeout 60 "$bin/example-pm_gaps" --seconds 5 --samples-per-decode 2000
    part "pm_gaps, idle, a 2 ms period"
    timeout 60 "$bin/example-pm_gaps" --seconds 5 --sample-ms 2
    part "pm_gaps under a bf16 matmul in another process"
    python3 "$pydir/bf16_matmul.py" --seconds 12 >/dev/null &
    load=$!
    sleep 4
    timeout 60 "$bin/example-pm_gaps" --seconds 5
    kill "$load" 2>/dev/null; wait "$load" 2>/dev/null
    part "gpu-tools top on an idle GPU, the library's log of each gap and image restart"
    RUST_LOG=gpu_tools::cupti::profiler::pm_sampling=debug timeout 30 "$gt" top --device 0 --duration 3 >/dev/null \
      2>"$out/top-gaps.log"
    echo "exit $?"
    echo "gaps logged: $(grep -c 'a gap, no loss reported' "$out/top-gaps.log"), of which after an image restart: \
$(grep 'a gap, no loss reported' "$out/top-gaps.log" | grep -c 'after an image restart')"
    grep 'image full' "$out/top-gaps.log" | head -n 5
    grep -E 'stopped:|gpu-tools top: device' "$out/top-gaps.log"
    ;;
  exporter)
    mkdir -p "$out"
    scrape() { python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())' "$1"; }
    part "gpu-tools top --prometheus 9401: idle, then a bf16 matmul in another process"
    timeout 60 "$gt" top --prometheus 9401 --duration 20 >/dev/null 2>"$out/exporter.log" &
    exporter=$!
    sleep 4
    scrape http://127.0.0.1:9401/metrics >"$out/exporter-idle.prom"
    grep -E '^(DCGM_FI_PROF|gpu_tools_(samples_lost|sampling_gaps|gpu_up))' "$out/exporter-idle.prom"
    python3 "$pydir/bf16_matmul.py" --seconds 10 >/dev/null &
    load=$!
    sleep 6
    scrape http://127.0.0.1:9401/metrics >"$out/exporter-busy.prom"
    grep -E '^(DCGM_FI_PROF|gpu_tools_dram)' "$out/exporter-busy.prom"
    kill "$load" 2>/dev/null; wait "$load" 2>/dev/null
    if command -v promtool >/dev/null; then promtool check metrics <"$out/exporter-busy.prom" && echo "promtool: ok"; fi
    wait "$exporter"; echo "exit $?"
    cat "$out/exporter.log"
    ;;
  profile)
    part "gpu-tools profile and ncu on a 512 MiB copy"
    timeout 120 "$gt" profile --set basic -- "$bin/example-counter_kernels" copy --bytes 536870912
    # Like the range profiler: no cache flush and no clock lock (ncu's defaults do both).
    timeout 180 "$ncu_bin" --cache-control none --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed \
      --print-units base "$bin/example-counter_kernels" copy --bytes 536870912 | tail -n 12
    part "gpu-tools profile --pc-sampling on the pointer chase"
    GPU_TOOLS_TRACE_LOG=info timeout 120 "$gt" profile --pc-sampling --metrics dram__bytes_read.sum -- \
      "$bin/example-counter_kernels" chase --steps 2048 --threads 65536 --mib 256
    part "gpu-tools profile on torch_train.py --steps 5"
    GPU_TOOLS_TRACE_LOG=info timeout 300 "$gt" profile --set basic -- python3 "$pydir/torch_train.py" --steps 5 | tail -n 30
    ;;
  bad)
    part "bad input (each must fail with a clear message and a non-zero exit)"
    for cmd in \
      "bin-gpu-tools profile --metrics dram__bytes_reed.sum -- $bin/example-counter_kernels copy" \
      "bin-gpu-tools metrics --device 0 --method pm --check gpu__time_duration.sum" \
      "bin-gpu-tools top --device 7 --duration 1" \
      "bin-gpu-tools profile --set basic -- /bin/true"; do
      echo "\$ $cmd"; timeout 60 "$bin"/$cmd; echo "exit $?"
    done
    echo "\$ gpu-tools top while another gpu-tools top holds the counters"
    timeout 20 "$gt" top --duration 6 >/dev/null &
    first=$!
    sleep 2
    timeout 20 "$gt" top --duration 1; echo "exit $?"
    echo "\$ ncu while gpu-tools top holds the counters"
    timeout 60 "$ncu_bin" --metrics dram__bytes_read.sum "$bin/example-counter_kernels" copy --bytes 16777216 2>&1 | tail -n 4
    wait "$first"
    ;;
  pc)
    part "gpu-tools profile --pc-sampling on the pointer chase, alone"
    GPU_TOOLS_TRACE_LOG=info timeout 120 "$gt" profile --pc-sampling -- \
      "$bin/example-counter_kernels" chase --steps 2048 --threads 65536 --mib 256 2>&1 | tail -n 25
    part "gpu-tools profile --pc-sampling with dram__bytes_read.sum"
    GPU_TOOLS_TRACE_LOG=info timeout 120 "$gt" profile --pc-sampling --metrics dram__bytes_read.sum -- \
      "$bin/example-counter_kernels" chase --steps 2048 --threads 65536 --mib 256 2>&1 | tail -n 25
    ;;
  replay)
    part "kernel replay: the copy program's elapsed_ms per launch count and size"
    for spec in "1048576 200" "268435456 20"; do
      set -- $spec
      echo "copy --bytes $1 --repeat $2"
      echo "  native: $("$bin/example-counter_kernels" copy --bytes "$1" --repeat "$2" | grep -o 'elapsed_ms.*')"
      for m in gpu__time_duration.sum sm__throughput.avg.pct_of_peak_sustained_elapsed; do
        echo "  $m: $("$gt" profile --metrics "$m" --csv -- "$bin/example-counter_kernels" copy --bytes "$1" --repeat "$2" 2>/dev/null | grep -o 'elapsed_ms [0-9.]*')"
      done
      echo "  sm__throughput, --launches-per-kernel 1: $("$gt" profile --launches-per-kernel 1 --metrics sm__throughput.avg.pct_of_peak_sustained_elapsed --csv -- "$bin/example-counter_kernels" copy --bytes "$1" --repeat "$2" 2>&1 | grep -E -o 'elapsed_ms [0-9.]*|[0-9]+ launches profiled.*' | tr '\n' ' ')"
    done
    ;;
  eager)
    part "torch_train.py natively, lazy and eager module loading"
    for i in 1 2; do
      echo "lazy:  $(python3 "$pydir/torch_train.py" --steps 5)"
      echo "eager: $(CUDA_MODULE_LOADING=EAGER python3 "$pydir/torch_train.py" --steps 5)"
    done
    ;;
  torchcost)
    stamp() { while IFS= read -r l; do printf '%s %s\n' "$(date +%s.%3N)" "$l"; done; }
    py=(python3 "$pydir/torch_train.py" --steps 5)
    part "torch_train.py: native, traced (kernels), one metric, basic with --launches-per-kernel 1"
    for i in 1 2; do
      echo "native: $("${py[@]}" | grep -o 'cuda_ms [0-9.]*')"
      echo "traced: $(CUDA_INJECTION64_PATH="$bin/libgpu_tools_inject.so" GPU_TOOLS_TRACE_KINDS=kernel \
        GPU_TOOLS_TRACE_FILE=/tmp/torchcost-%p.trace "${py[@]}" | grep -o 'cuda_ms [0-9.]*')"
    done
    echo "one metric, every launch:"
    GPU_TOOLS_TRACE_LOG=debug "$gt" profile --metrics gpu__time_duration.sum --csv -- "${py[@]}" 2>&1 | stamp | \
      grep -E "cuda_ms|set.up|decoded|ranges per decode|launches profiled|profiling kernels|tracing with" | cut -c1-400
    echo "basic, --launches-per-kernel 1:"
    GPU_TOOLS_TRACE_LOG=debug "$gt" profile --set basic --launches-per-kernel 1 --csv -- "${py[@]}" 2>&1 | stamp | \
      grep -E "cuda_ms|set.up|decoded|ranges per decode|launches profiled|pass [0-9]+ ended|profiling kernels|tracing with|WARN|ERROR" | \
      cut -c1-400 | tail -n 60
    echo "basic, every launch:"
    GPU_TOOLS_TRACE_LOG=debug "$gt" profile --set basic --csv -- "${py[@]}" 2>&1 | stamp | \
      grep -E "cuda_ms|set.up|decoded|ranges per decode|launches profiled|WARN|ERROR" | cut -c1-400 | tail -n 30
    ;;
  cost | sustained | torch)
    part "benchmark: $p"
    timeout 590 "$bin/bench-cupti_counters_gpu" "$p" --rounds "${ROUNDS:-3}" 2>&1 | tail -n 80
    ;;
  *) echo "unknown part $p" ;;
  esac
done

#!/usr/bin/env bash
# Whether a job stays slower once a trace window has ended, and why (docs/measurements.md, "The recorder's cost, and
# a job slower after any window"): a raw CUPTI client in the job's own process (after_window_probe.cu: kernel
# records on for 0.5 s, off, then cuptiFinalize), and a C flood job (benches/gpu/tracer_work.cu steady) attached
# once with `trace --pid --duration 0.5 --no-pc-primer --no-flight-recorder` (also with `--kinds kernel`) against
# an untouched twin, its rate in 2 s bins over 18 s. Prints the rates; the logs are in /tmp/after-window.
# Stage first (STAGE_ONLY='^gpu-tools$' scripts/gpu-stage), then, in the checkout that goes with .gpu/:
#   bash gpu-host/scripts/after_window.sh
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); gt=${GT:-$root/.gpu/bin/bin-gpu-tools}
cuda=${CUDA_HOME:-/usr/local/cuda}
tmp=/tmp/after-window; rm -rf "$tmp"; mkdir -p "$tmp"
inc=$(dirname "$(find "$cuda/" -name cupti.h | head -1)"); lib=$(dirname "$(find "$cuda/" -name 'libcupti.so*' | head -1)")
"$cuda/bin/nvcc" -O2 -arch=native -I"$inc" -L"$lib" -Xlinker -rpath="$lib" -o "$tmp/probe" \
  "$root/gpu-host/scripts/after_window_probe.cu" -lcupti || exit 1
"$cuda/bin/nvcc" -O2 -arch=native -o "$tmp/work" "$root/benches/gpu/tracer_work.cu" || exit 1
echo "== in process: kernel records 0.5 s, then off, then cuptiFinalize"
FINALIZE=1 "$tmp/probe" kernel
echo "== in process: kernel, runtime and driver records 0.5 s, then off, then cuptiFinalize"
FINALIZE=1 "$tmp/probe" kernel,runtime,driver
rates() { # LOG: floods a second in 2 s bins of the job's own clock
  awk '$1 == "progress" { if (!t0) t0 = $3; b = int(($3 - t0) / 2); if (!(b in f)) { f[b] = $2; ft[b] = $3 }
    l[b] = $2; lt[b] = $3 }
    END { for (b = 0; b in f; b++) printf "%.0f ", (l[b] - f[b]) / (lt[b] - ft[b] + 1e-9); print "" }' "$1"
}
n=0
for variant in untouched "--no-pc-primer --no-flight-recorder" "--no-pc-primer --no-flight-recorder --kinds kernel"; do
  n=$((n + 1))
  "$tmp/work" steady 18 > "$tmp/job$n.log" 2> "$tmp/job$n.err" &
  job=$!
  sleep 5
  if [ "$variant" != untouched ]; then
    # shellcheck disable=SC2086 # the variant's flags are words
    timeout 60 "$gt" trace --pid "$job" --duration 0.5 -q $variant -o "$tmp/w$n.gputrace" > "$tmp/gt$n.txt" 2>&1
    echo "trace --pid exit $?"
  fi
  wait "$job"
  echo "== $variant (a window about 6 s in): floods a second, 2 s bins"
  rates "$tmp/job$n.log"
done
